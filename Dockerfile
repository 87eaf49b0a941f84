# syntax=docker/dockerfile:1
# The Portico image: one image for every component (`portico controller`,
# `portico ratelimit-server`), Node.js 24 LTS, production dependencies only, non-root, no shell.
#
#   docker build -t ghcr.io/portico-dev/portico:0.1.0 .
#
# scripts/check-image.sh runs the steps below as plain commands in a temporary directory (there is no
# Docker engine in CI) and checks the result, so keep to what it understands: ARG, FROM ... AS,
# WORKDIR, COPY (from the context or --from=<stage>), RUN, ENV, USER, ENTRYPOINT, CMD, LABEL, EXPOSE;
# paths in RUN relative to WORKDIR.

ARG NODE_MAJOR=24

# Production dependencies alone. --ignore-scripts: no dependency needs its install script (the only
# one with a script, protobufjs, prints a version warning), and the package's own `prepare` (tsc)
# needs the dev dependencies.
FROM node:${NODE_MAJOR}-bookworm-slim AS deps
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund
# Type declarations, sourcemaps, TypeScript sources and docs are half of node_modules and never run.
RUN find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -iname '*.md' \) -delete

# The build: every dependency, then tsc into dist/ (the tests and the sourcemaps stay out).
FROM node:${NODE_MAJOR}-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/bundle.ts ./scripts/
RUN npx tsc -p tsconfig.build.json --sourceMap false && npx tsx scripts/bundle.ts

# The runtime: distroless Node.js (no shell, no package manager), user nonroot (65532).
FROM gcr.io/distroless/nodejs${NODE_MAJOR}-debian12:nonroot
LABEL org.opencontainers.image.title="portico" \
      org.opencontainers.image.description="Portico: custom domains and per-plan API rate limits for Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV NODE_ENV=production
WORKDIR /app
COPY package.json ./
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# The Envoy rate-limit protos the rate-limit server loads at run time (src/ratelimit/protocol.ts).
COPY proto ./proto
# Numeric, so that the kubelet can check runAsNonRoot.
USER 65532:65532
EXPOSE 8080 8081 8082 8089
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/cli.js"]
CMD ["--help"]
