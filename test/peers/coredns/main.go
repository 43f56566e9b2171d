// Command coredns is CoreDNS v1.15.0 unchanged: its own root main.go, with
// every plugin of its default build (core/plugin) plugged in.
package main

import (
	_ "github.com/coredns/coredns/core/plugin" // Plug in CoreDNS's plugins.
	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
