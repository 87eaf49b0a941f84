# syntax=docker/dockerfile:1
# The Portico image: one image for every component (`portico controller`,
# `portico ratelimit-server`), Node.js 24 LTS, production dependencies only, non-root, no shell.
#
#   docker build --build-arg PORTICO_COMMIT=$(git rev-parse HEAD) -t ghcr.io/portico-dev/portico:<version> .
#
# (`npm run release` prints this command with the release's version and commit.)
#
# scripts/check-image.sh runs the steps below as plain commands in a temporary directory (there is no
# Docker engine in CI) and checks the result, so keep to what it understands: ARG, FROM ... AS,
# WORKDIR, COPY (from the context or --from=<stage>), RUN, ENV, USER, ENTRYPOINT, CMD, LABEL, EXPOSE;
# paths in RUN relative to WORKDIR.

# The base images, pinned by digest so that a rebuild of a release gets the same bases: Node.js 24
# on Debian 12 for the build stages, distroless Node.js 24 for the runtime. The digests were taken
# from public Dockerfiles that pin these tags (this machine cannot reach the registries to resolve
# them); to refresh: `docker buildx imagetools inspect node:24-bookworm-slim` and
# `... gcr.io/distroless/nodejs24-debian12:nonroot`, and keep both on the same Node.js major.
ARG BUILD_IMAGE=node:24-bookworm-slim@sha256:6f7b03f7c2c8e2e784dcf9295400527b9b1270fd37b7e9a7285cf83b6951452d
ARG RUNTIME_IMAGE=gcr.io/distroless/nodejs24-debian12:nonroot@sha256:14d42e2511532589a7c7e01a753667a74fcc96266e137e8125006b87b0c32d0a

# The package's manifest for the dependency stages: package.json and package-lock.json with the
# package's own version set to 0.0.0. A release changes nothing else in them (`npm version`), so the
# stages below, keyed by these files' contents, reuse the layers of any earlier build of the same
# dependencies (podman's and Docker's layer cache) instead of running `npm ci` again.
FROM ${BUILD_IMAGE} AS manifest
WORKDIR /src
COPY package.json package-lock.json ./
RUN node -e 'const fs = require("node:fs"); fs.mkdirSync("deps"); for (const f of ["package.json", "package-lock.json"]) { const j = JSON.parse(fs.readFileSync(f, "utf8")); j.version = "0.0.0"; if (j.packages && j.packages[""]) j.packages[""].version = "0.0.0"; fs.writeFileSync("deps/" + f, JSON.stringify(j, null, 2) + "\n"); }'

# Production dependencies alone. --ignore-scripts: no dependency needs its install script (the only
# one with a script, protobufjs, prints a version warning), and the package's own `prepare` (tsc)
# needs the dev dependencies.
FROM ${BUILD_IMAGE} AS deps
WORKDIR /src
COPY --from=manifest /src/deps/package.json /src/deps/package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
# Type declarations, sourcemaps, TypeScript sources and docs are half of node_modules and never run.
RUN find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -iname '*.md' \) -delete

# The build: every dependency, then tsc into dist/ (the tests and the sourcemaps stay out), then the
# bundles and dist/build-info.json, which take the version from the package's own package.json and
# the commit from PORTICO_COMMIT: tsc's layer does not depend on either, so a release of sources
# built before finds it in the cache.
FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY --from=manifest /src/deps/package.json /src/deps/package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -p tsconfig.build.json --sourceMap false
COPY package.json ./
COPY scripts/bundle.ts ./scripts/
# The commit `portico --version` and portico_build_info report (dist/build-info.json); the context
# has no .git.
ARG PORTICO_COMMIT=unknown
RUN npx tsx scripts/bundle.ts

# The runtime: distroless Node.js (no shell, no package manager), user nonroot (65532).
FROM ${RUNTIME_IMAGE}
LABEL org.opencontainers.image.title="portico" \
      org.opencontainers.image.description="Portico: custom domains and per-plan API rate limits for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /src/node_modules ./node_modules
COPY package.json ./
COPY --from=build /src/dist ./dist
# The Envoy rate-limit protos the rate-limit server loads at run time (src/ratelimit/protocol.ts).
COPY proto ./proto
# Numeric, so that the kubelet can check runAsNonRoot.
USER 65532:65532
EXPOSE 8080 8081 8082 8089
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/cli.js"]
CMD ["--help"]
