import { describe, expect, it } from 'vitest';

import { CERT_FILES } from './certificates.js';
import { containerdConfig, kubeletConfig, nodePaths, nodeScript, nodeTools, PAUSE_IMAGE } from './kubelet.js';
import { sandboxPaths } from './paths.js';

const paths = sandboxPaths('/tmp/portico-sandbox-test');
const node = nodePaths(paths);
const tools = nodeTools('/opt/tools/bin');
const ports = { kubelet: 10250, kubeletHealthz: 10248, scheduler: 10259, controllerManager: 10257 };

describe('the node configuration (src/sandbox/kubelet.ts)', () => {
  it('keeps the kubelet off the host firewall and kernel defaults, on loopback, with TLS client auth', () => {
    const config = JSON.parse(kubeletConfig(paths, node, ports)) as Record<string, unknown>;
    expect(config).toMatchObject({
      kind: 'KubeletConfiguration',
      makeIPTablesUtilChains: false,
      protectKernelDefaults: false,
      address: '127.0.0.1',
      port: 10250,
      readOnlyPort: 0,
      cgroupDriver: 'cgroupfs',
      failCgroupV1: false,
      containerRuntimeEndpoint: `unix://${node.containerdSocket}`,
      authentication: {
        anonymous: { enabled: false },
        x509: { clientCAFile: paths.cert(CERT_FILES.clusterCaCert) },
      },
    });
  });

  it('bind-mounts every kernel setting the kubelet writes, then starts containerd and execs the kubelet', () => {
    const script = nodeScript(paths, node, tools, paths.log('containerd'));
    for (const name of [
      'vm/overcommit_memory',
      'vm/panic_on_oom',
      'kernel/panic',
      'kernel/panic_on_oops',
      'kernel/keys/root_maxkeys',
      'kernel/keys/root_maxbytes',
    ]) {
      expect(script).toContain(`/proc/sys/${name}\n`);
    }
    // The mounts come before any process that could write them.
    expect(script.indexOf('mount --bind')).toBeLessThan(script.indexOf('setsid'));
    expect(script).toMatch(/\nexec '\/opt\/tools\/bin\/kubelet' '--config=/);
    expect(script).toContain("'--hostname-override=localhost'");
  });

  it('keeps containerd state under the sandbox directory and uses the local pause image and runc', () => {
    const toml = containerdConfig(node, tools);
    expect(toml).toContain(`root = "${node.dir}/containerd/root"`);
    expect(toml).toContain(`address = "${node.containerdSocket}"`);
    expect(toml).toContain(`sandbox_image = "${PAUSE_IMAGE}"`);
    expect(toml).toContain('BinaryName = "/opt/tools/bin/runc"');
    expect(toml).toContain('SystemdCgroup = false');
    expect(toml).toContain(`conf_dir = "${node.cniConfDir}"`);
  });
});
