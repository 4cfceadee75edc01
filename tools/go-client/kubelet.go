// The kubelet side of a restart, done the way the kubelet does it: wipe the sockets of
// the device-plugin directory, net.Listen the registration socket (bind and listen back
// to back: the plugin's inotify fires at the bind, so a plugin that dials at once can
// land between the two and be refused) and serve Registration with grpc-go.
//
//	go-client kubelet-restarts <dir> <n>   n restarts; one line each:
//	                                       "<µs from the Listen call to Register arriving>"
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
)

func wipeSockets(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		fail("reading %s: %v", dir, err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// registrationHandler serves the kubelet's Registration service as raw bytes: every call is
// answered Empty, and onRegister sees each Register request.
func registrationHandler(onRegister func(req []byte)) grpc.StreamHandler {
	return func(srv interface{}, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		var req []byte
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		if method == "/v1beta1.Registration/Register" {
			onRegister(req)
		}
		empty := []byte{}
		return stream.SendMsg(&empty)
	}
}

func kubeletRestarts(dir string, n int) {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	registered := make(chan time.Time, 16)
	handler := registrationHandler(func([]byte) { registered <- time.Now() })
	sock := filepath.Join(dir, "kubelet.sock")
	for i := 0; i < n; i++ {
		wipeSockets(dir)
		srv := grpc.NewServer(grpc.CustomCodec(rawCodec{}), grpc.UnknownServiceHandler(handler))
		t0 := time.Now()
		lis, err := net.Listen("unix", sock)
		if err != nil {
			fail("listen %s: %v", sock, err)
		}
		go srv.Serve(lis)
		select {
		case t := <-registered:
			fmt.Fprintf(out, "%d\n", t.Sub(t0).Microseconds())
		case <-time.After(30 * time.Second):
			fail("restart %d: no Register within 30 s", i)
		}
		srv.Stop()
	}
}
