package faultnet_test

import (
	"fmt"
	"io"
	"net"

	"github.com/airlockdev/airlock/internal/faultnet"
)

// A target that echoes, a proxy in front of it, and a connection cut after
// 5 bytes up: the target receives "hello", the client reads nothing back
// (the cut comes before the echo).
func ExampleProxy() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
	}()

	p, err := faultnet.Listen(ln.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	p.Arm(faultnet.Fault{After: 5, Dir: faultnet.Up, Mode: faultnet.Cut})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte("hello, world"))
	back, _ := io.ReadAll(c)
	fmt.Printf("target got %q, client got %q\n", <-got, back)
	fmt.Println(p.Bytes(), p.Tripped())
	// Output:
	// target got "hello", client got ""
	// {5 0} 1
}
