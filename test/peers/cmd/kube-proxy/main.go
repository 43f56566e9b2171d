// Command kube-proxy is the real kube-proxy of the pinned Kubernetes release,
// unchanged: this file is k8s.io/kubernetes/cmd/kube-proxy/proxy.go of that
// release (Apache License 2.0, The Kubernetes Authors).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // for client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	command := app.NewProxyCommand()
	code := cli.Run(command)
	os.Exit(code)
}
