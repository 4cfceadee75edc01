// The kubelet's side of DRA for one claim, for scripts/gpu-smoke.sh on a host that has
// no Python: find the plugin's registration socket the way the kubelet's plugin watcher
// does, GetInfo and NotifyRegistrationStatus on it, dial the DRA endpoint it names,
// read the first NodeWatchResources list (the health the kubelet puts in pod status),
// prepare one claim, read the CDI spec file the plugin wrote for it, unprepare it and
// check that the file is gone. Each step prints one "<step>: ..." line; the spec file's
// lines are printed with a "  spec| " prefix; the last line is "dra-smoke ok". Any
// failure is one "go-client: ..." line on stderr and exit status 1.
//
// With "-- COMMAND [ARG]...", COMMAND runs while the claim is prepared (gpu-smoke.sh
// builds a container from the spec with it), its stdout and stderr ours, with
// GDP_CDI_SPEC (the spec file) and GDP_CDI_DEVICES (the CDI device IDs the kubelet got,
// comma-separated) added to the environment, killed after 90 s; "exec: exit status N,
// M ms" follows it. The claim is unprepared either way; a command that failed makes the
// exit status 1 after that.
//
//	go-client dra-smoke <registrar dir> <cdi root> <namespace> <name> <uid> [-- COMMAND [ARG]...]
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

const draDriver = "gpu.nvidia.com"

func registrationCall(conn *grpc.ClientConn, method string, req []byte) []byte {
	resp, _, err := invoke(conn, "/pluginregistration.Registration/"+method, req, 10*time.Second)
	if err != nil {
		fail("%s: %v", method, err)
	}
	return resp
}

// draRegister plays the plugin watcher: GetInfo, then the registration reported as done.
// Returns the DRA endpoint.
func draRegister(dir string) string {
	sock := filepath.Join(dir, draDriver+"-reg.sock")
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			fail("no registration socket %s after 10 s", sock)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn := dial(sock)
	defer conn.Close()
	info := registrationCall(conn, "GetInfo", []byte{})
	var versions []string
	for _, v := range fields(info, 4) {
		versions = append(versions, string(v))
	}
	typ, name, endpoint := str(info, 1), str(info, 2), str(info, 3)
	fmt.Printf("getinfo: type=%s name=%s endpoint=%s versions=%s\n", typ, name, endpoint,
		strings.Join(versions, ","))
	if typ != "DRAPlugin" || name != draDriver || endpoint == "" {
		fail("GetInfo: want type DRAPlugin, name %s and an endpoint", draDriver)
	}
	var st []byte
	st = protowire.AppendTag(st, 1, protowire.VarintType)
	st = protowire.AppendVarint(st, 1)
	registrationCall(conn, "NotifyRegistrationStatus", st)
	fmt.Printf("registration: reported registered\n")
	return endpoint
}

var healthNames = map[uint64]string{0: "Unknown", 1: "Healthy", 2: "Unhealthy"}

// draHealth reads the first list of the health stream, as the kubelet does on connect.
func draHealth(conn *grpc.ClientConn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := serverStream(ctx, conn, "/v1alpha1.DRAResourceHealth/NodeWatchResources")
	var list []byte
	if err := stream.RecvMsg(&list); err != nil {
		fail("NodeWatchResources: %v", err)
	}
	var devs []string
	for _, d := range fields(list, 1) {
		id := fields(d, 1)
		if len(id) != 1 {
			fail("NodeWatchResources: a device without its identifier")
		}
		devs = append(devs, fmt.Sprintf("%s/%s=%s", str(id[0], 1), str(id[0], 2),
			healthNames[scalar(d, 2)]))
	}
	if len(devs) == 0 {
		fail("NodeWatchResources: an empty first list")
	}
	fmt.Printf("health: %s\n", strings.Join(devs, " "))
}

// runWhilePrepared runs the command of dra-smoke's "--" and returns its exit status.
func runWhilePrepared(command []string, spec string, ids []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Env = append(os.Environ(), "GDP_CDI_SPEC="+spec, "GDP_CDI_DEVICES="+strings.Join(ids, ","))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	rc := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		rc = exit.ExitCode() // -1 when killed by a signal
	case err != nil:
		fmt.Fprintf(os.Stderr, "go-client: %s: %v\n", command[0], err)
		rc = 127
	}
	fmt.Printf("exec: exit status %d, %d ms\n", rc, time.Since(start).Milliseconds())
	return rc
}

func draSmoke(args []string) {
	var command []string
	if len(args) > 6 && args[5] == "--" {
		command = args[6:]
		args = args[:5]
	}
	if len(args) != 5 {
		fail("dra-smoke <registrar dir> <cdi root> <namespace> <name> <uid> [-- COMMAND [ARG]...]")
	}
	cdiRoot, ns, name, uid := args[1], args[2], args[3], args[4]
	endpoint := draRegister(args[0])
	conn := dial(endpoint)
	defer conn.Close()
	draHealth(conn)

	req := claimsRequest(ns, name, uid)
	took, resp := draCall(conn, "NodePrepareResources", req)
	var result []byte
	for _, entry := range fields(resp, 1) {
		if str(entry, 1) == uid {
			if v := fields(entry, 2); len(v) > 0 {
				result = v[0]
			}
		}
	}
	if msg := str(result, 2); msg != "" {
		fail("NodePrepareResources %s/%s: %s", ns, name, msg)
	}
	var devs, allIDs []string
	for _, d := range fields(result, 1) {
		var ids []string
		for _, id := range fields(d, 4) {
			ids = append(ids, string(id))
		}
		allIDs = append(allIDs, ids...)
		devs = append(devs, fmt.Sprintf("%s/%s cdi=%s", str(d, 2), str(d, 3), strings.Join(ids, ",")))
	}
	if len(devs) == 0 {
		fail("NodePrepareResources %s/%s: no devices", ns, name)
	}
	fmt.Printf("prepare: %d µs, %s\n", took.Microseconds(), strings.Join(devs, "; "))

	spec := filepath.Join(cdiRoot, "k8s.gpu.nvidia.com-claim_"+uid+".yaml")
	text, err := os.ReadFile(spec)
	if err != nil {
		fail("the claim's CDI spec: %v", err)
	}
	fmt.Printf("cdi spec: %s (%d bytes)\n", spec, len(text))
	for _, line := range strings.Split(strings.TrimRight(string(text), "\n"), "\n") {
		fmt.Printf("  spec| %s\n", line)
	}
	rc := 0
	if len(command) > 0 {
		rc = runWhilePrepared(command, spec, allIDs)
	}

	took, resp = draCall(conn, "NodeUnprepareResources", req)
	msg, _, found := claimResult(resp, uid, 1)
	if !found || msg != "" {
		fail("NodeUnprepareResources %s/%s: %q (answered: %t)", ns, name, msg, found)
	}
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		fail("the claim's CDI spec is still there after NodeUnprepareResources")
	}
	fmt.Printf("unprepare: %d µs, the spec file removed\n", took.Microseconds())
	if rc != 0 {
		fail("%s exited with status %d while the claim was prepared", command[0], rc)
	}
	fmt.Println("dra-smoke ok")
}
