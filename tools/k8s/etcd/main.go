// Command etcd is etcd's own server command, built at the release the
// test cluster pins (go.mod), in a module of its own: its dependencies do
// not agree with Kubernetes's.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
