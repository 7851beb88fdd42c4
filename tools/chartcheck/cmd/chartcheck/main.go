// Command chartcheck decodes rendered Kubernetes manifests strictly with the
// Kubernetes API types and checks the references between them:
//
//	helm template r charts/hermes | chartcheck -
//	chartcheck rendered-default.yaml rendered-dind.yaml
//
// It prints one line per input and exits 1 if any input has an error.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hermesrun/hermes/tools/chartcheck"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "usage: chartcheck FILE... (- reads standard input)")
		return 2
	}
	dec, err := chartcheck.NewDecoder()
	if err != nil {
		fmt.Fprintf(stderr, "chartcheck: %v\n", err)
		return 1
	}
	code := 0
	for _, name := range args {
		if err := checkFile(dec, name, stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "chartcheck: %s: %v\n", name, err)
			code = 1
		}
	}
	return code
}

func checkFile(dec *chartcheck.Decoder, name string, stdin io.Reader, stdout io.Writer) error {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	objs, err := dec.Decode(r)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("no objects")
	}
	rep, err := chartcheck.Check(objs)
	if err != nil {
		return err
	}
	kinds := make([]string, len(objs))
	for i, o := range objs {
		kinds[i] = o.String()
	}
	ext := make([]string, len(rep.External))
	for i, r := range rep.External {
		ext[i] = r.String()
	}
	line := fmt.Sprintf("%s: %d objects decoded strictly: %s", name, len(objs), strings.Join(kinds, ", "))
	if len(ext) > 0 {
		line += "; must exist in the cluster: " + strings.Join(ext, ", ")
	}
	fmt.Fprintln(stdout, line)
	return nil
}
