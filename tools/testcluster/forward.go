package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
)

// forward accepts connections on from and copies each both ways to a new
// connection to to, until ctx ends. Addresses are tcp:HOST:PORT or
// unix:PATH. Two of them, one on each side of the network namespace and a
// unix socket between (the file system is shared), carry the API server's
// port to the host.
func forward(ctx context.Context, from, to string) error {
	fnet, faddr, err := splitAddr(from)
	if err != nil {
		return err
	}
	tnet, taddr, err := splitAddr(to)
	if err != nil {
		return err
	}
	if fnet == "unix" {
		_ = os.Remove(faddr) // a socket left by an earlier forwarder
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, fnet, faddr)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	if fnet == "unix" {
		if err := os.Chmod(faddr, 0o600); err != nil {
			ln.Close()
			return err
		}
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("forward: %w", err)
		}
		go func() {
			defer in.Close()
			out, err := (&net.Dialer{}).DialContext(ctx, tnet, taddr)
			if err != nil {
				return
			}
			defer out.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				if c, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = c.CloseWrite()
				}
			}
			go pipe(out, in)
			go pipe(in, out)
			wg.Wait()
		}()
	}
}

func splitAddr(a string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(a, ":")
	if !ok || (network != "tcp" && network != "unix") || addr == "" {
		return "", "", fmt.Errorf("address %q: want tcp:HOST:PORT or unix:PATH", a)
	}
	return network, addr, nil
}
