// Command pause is the process of a Pod's sandbox container (containerd's sandbox_image in the
// sandbox's node, src/sandbox/kubelet.ts): it holds the Pod's namespaces, reaps children that are
// re-parented to it (it is PID 1 of its PID namespace when the Pod shares one) and exits 0 on
// SIGINT or SIGTERM, like Kubernetes' build/pause/linux/pause.c.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		os.Stdout.WriteString("pause (portico test/tools/pause)\n")
		return
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Reap every child that has exited.
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
