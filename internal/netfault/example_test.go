package netfault_test

import (
	"fmt"
	"net"
	"time"

	"github.com/jobpipe/jobpipe/internal/netfault"
)

// A link in front of a server: connect through it, cut it, and heal it.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // the server
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello\n"))
			c.Close()
		}
	}()

	link, err := netfault.Start("example", ln.Addr().String())
	if err != nil {
		panic(err)
	}
	defer link.Close()
	greet := func() string {
		c, err := net.DialTimeout("tcp", link.Addr(), time.Second)
		if err != nil {
			return "refused"
		}
		defer c.Close()
		buf := make([]byte, 6)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(buf); err != nil {
			return err.Error()
		}
		return string(buf[:5])
	}

	fmt.Println(greet())
	if err := link.Cut(); err != nil {
		panic(err)
	}
	fmt.Println(greet())
	if err := link.Heal(); err != nil {
		panic(err)
	}
	fmt.Println(greet())
	// Output:
	// hello
	// refused
	// hello
}
