// The kubelet's side of DRA Prepare / Unprepare with grpc-go, the library the kubelet
// itself uses, for bench/bench-dra.py: a Python grpcio client spends most of a
// millisecond of its own on each call once its process has slept between claims, which
// the kubelet does not.
//
//	go-client bench-prepare <dra socket> <pace ms>
//	    stdin: one claim per line, "<namespace> <name> <uid>". For each: sleep <pace>,
//	    NodePrepareResources (v1) of that claim alone, the same again, then
//	    NodeUnprepareResources. stdout, one line per claim:
//	    "<µs first prepare> <µs second prepare> <µs unprepare>".
//	    Exit 1 on an RPC error, a claim answered with an error or without devices.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

const draService = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"

// claimsRequest encodes Node(Un)PrepareResourcesRequest{claims: [{namespace, uid, name}]}.
func claimsRequest(ns, name, uid string) []byte {
	var c []byte
	c = protowire.AppendTag(c, 1, protowire.BytesType)
	c = protowire.AppendString(c, ns)
	c = protowire.AppendTag(c, 2, protowire.BytesType)
	c = protowire.AppendString(c, uid)
	c = protowire.AppendTag(c, 3, protowire.BytesType)
	c = protowire.AppendString(c, name)
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, c)
}

// claimResult finds uid's entry in a Node(Un)PrepareResourcesResponse (map<string, R>
// claims = 1) and returns R's error (field errField) and its number of devices (field 1
// of a prepare result).
func claimResult(resp []byte, uid string, errField protowire.Number) (string, int, bool) {
	for _, entry := range fields(resp, 1) {
		k, v := fields(entry, 1), fields(entry, 2)
		if len(k) != 1 || string(k[0]) != uid {
			continue
		}
		if len(v) == 0 { // an empty result: no error, no devices
			return "", 0, true
		}
		msg := ""
		if e := fields(v[0], errField); len(e) > 0 {
			msg = string(e[len(e)-1])
		}
		return msg, len(fields(v[0], 1)), true
	}
	return "", 0, false
}

func draCall(conn *grpc.ClientConn, method string, req []byte) (time.Duration, []byte) {
	resp, took, err := invoke(conn, draService+method, req, 45*time.Second)
	if err != nil {
		fail("%s: %v", method, err)
	}
	return took, resp
}

func benchPrepare(socket string, pace time.Duration) {
	conn := dial(socket)
	defer conn.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 3 {
			fail("bench-prepare: want \"<namespace> <name> <uid>\", got %q", in.Text())
		}
		req := claimsRequest(f[0], f[1], f[2])
		time.Sleep(pace)
		var took [3]time.Duration
		for i, method := range []string{"NodePrepareResources", "NodePrepareResources",
			"NodeUnprepareResources"} {
			var resp []byte
			took[i], resp = draCall(conn, method, req)
			errField := protowire.Number(2)
			if i == 2 {
				errField = 1
			}
			msg, devices, found := claimResult(resp, f[2], errField)
			switch {
			case !found:
				fail("%s %s/%s: no result for %s", method, f[0], f[1], f[2])
			case msg != "":
				fail("%s %s/%s: %s", method, f[0], f[1], msg)
			case i < 2 && devices == 0:
				fail("%s %s/%s: no devices", method, f[0], f[1])
			}
		}
		fmt.Fprintf(out, "%d %d %d\n", took[0].Microseconds(), took[1].Microseconds(),
			took[2].Microseconds())
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fail("bench-prepare: reading claims: %v", err)
	}
}

func benchPrepareMain(args []string) {
	if len(args) != 2 {
		fail("bench-prepare <dra socket> <pace ms>")
	}
	ms, err := strconv.ParseFloat(args[1], 64)
	if err != nil || ms < 0 {
		fail("bench-prepare: bad pace %q", args[1])
	}
	benchPrepare(args[0], time.Duration(ms*float64(time.Millisecond)))
}
