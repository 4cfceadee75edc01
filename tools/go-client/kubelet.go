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

// kubeletRestarts pairs each Register with its restart: every restart has its own server
// and its own channel, so a second Register for one restart (a plugin that registers again)
// is dropped with that restart instead of ending the next one at once. It owns the socket
// file: Go's listener would unlink its path on Close, and a Close that comes late (Stop
// racing the Serve goroutine) would remove the next restart's kubelet.sock; here the
// listener never unlinks, Serve has returned before the next restart begins, and the
// next restart's wipe removes the old file, as the kubelet's does.
func kubeletRestarts(dir string, n int) {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	sock := filepath.Join(dir, "kubelet.sock")
	for i := 0; i < n; i++ {
		wipeSockets(dir)
		registered := make(chan time.Time, 1)
		handler := registrationHandler(func([]byte) {
			select {
			case registered <- time.Now():
			default: // this restart's second Register: it was timed by the first
			}
		})
		srv := grpc.NewServer(grpc.CustomCodec(rawCodec{}), grpc.UnknownServiceHandler(handler))
		t0 := time.Now()
		lis, err := net.Listen("unix", sock)
		if err != nil {
			fail("listen %s: %v", sock, err)
		}
		lis.(*net.UnixListener).SetUnlinkOnClose(false)
		served := make(chan struct{})
		go func() {
			srv.Serve(lis)
			close(served)
		}()
		select {
		case t := <-registered:
			fmt.Fprintf(out, "%d\n", t.Sub(t0).Microseconds())
		case <-time.After(30 * time.Second):
			fail("restart %d: no Register within 30 s", i)
		}
		srv.Stop()
		<-served
		lis.Close() // Serve closes it too, unless Stop came first; closing twice is harmless
	}
}
