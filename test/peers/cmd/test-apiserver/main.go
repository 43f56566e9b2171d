// Command test-apiserver runs a real Kubernetes API server for drover's tests:
// an embedded etcd (go.etcd.io/etcd/server/v3/embed) and the real
// kube-apiserver of the pinned release (app.NewAPIServerCommand), in one
// process, listening on 127.0.0.1 only.
//
// Everything it needs lives in one state directory (--state-dir, or a
// temporary one removed at exit): the etcd data, the service-account signing
// key, the serving certificate kube-apiserver generates (--cert-dir), the
// static token file holding the admin credential, and an admin kubeconfig.
// Started again with the same --state-dir it keeps its data, keys and ports,
// so tokens issued before a restart stay valid and clients reconnect to the
// same address.
//
// When kube-apiserver answers /readyz it prints one line to stdout:
//
//	READY {"server":"https://127.0.0.1:PORT","etcd":"http://127.0.0.1:PORT",...}
//
// (the fields of the state type below) and writes the same JSON to
// STATE_DIR/state.json. SIGTERM or SIGINT shuts kube-apiserver down, then
// etcd, then removes a temporary state directory.
//
// Arguments after "--" are passed to kube-apiserver after the ones set here,
// so a later one overrides (pflag keeps the last value), for example
// `-- --watch-cache=false --min-request-timeout=5`.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// state is what a client needs to reach the server; it is kept in
// STATE_DIR/state.json and reused by a restart with the same state directory.
type state struct {
	// Server is kube-apiserver's HTTPS address.
	Server string `json:"server"`
	// Etcd is the embedded etcd's client URL (plain HTTP, with the v3 JSON gateway).
	Etcd string `json:"etcd"`
	// SecurePort, EtcdClientPort and EtcdPeerPort are the 127.0.0.1 ports.
	SecurePort     int `json:"securePort"`
	EtcdClientPort int `json:"etcdClientPort"`
	EtcdPeerPort   int `json:"etcdPeerPort"`
	// AdminToken is a bearer token of user "admin" in group system:masters.
	AdminToken string `json:"adminToken"`
	// Kubeconfig is an admin kubeconfig (the serving certificate as CA, the admin token).
	Kubeconfig string `json:"kubeconfig"`
	// CA is the PEM file kube-apiserver's serving certificate chains to.
	CA string `json:"ca"`
	// StateDir is the state directory.
	StateDir string `json:"stateDir"`
	// ServiceClusterIPRange is kube-apiserver's --service-cluster-ip-range.
	ServiceClusterIPRange string `json:"serviceClusterIPRange"`
	// PID is this process.
	PID int `json:"pid"`
}

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("test-apiserver", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "directory for etcd data, keys, certificates and kubeconfig; kept at exit (default: a temporary directory, removed at exit)")
	securePort := fs.Int("secure-port", 0, "kube-apiserver HTTPS port on 127.0.0.1 (0: the one in state.json, else a free one)")
	etcdPort := fs.Int("etcd-port", 0, "etcd client port on 127.0.0.1 (0: the one in state.json, else a free one)")
	serviceRange := fs.String("service-cluster-ip-range", "10.96.0.0/16", "kube-apiserver --service-cluster-ip-range (two CIDRs, one per family, for dual-stack)")
	verbosity := fs.Int("v", 0, "kube-apiserver log verbosity")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	extra := fs.Args()
	if len(extra) > 0 && extra[0] == "--" {
		extra = extra[1:]
	}

	temporary := *stateDir == ""
	if temporary {
		dir, err := os.MkdirTemp("", "drover-test-apiserver-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "test-apiserver:", err)
			return 1
		}
		*stateDir = dir
		defer os.RemoveAll(dir)
	}
	dir, err := filepath.Abs(*stateDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-apiserver:", err)
		return 1
	}
	st, err := prepare(dir, *securePort, *etcdPort, *serviceRange)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-apiserver:", err)
		return 1
	}

	etcd, err := startEtcd(dir, st)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-apiserver: etcd:", err)
		return 1
	}
	defer func() {
		etcd.Close()
		<-etcd.Server.StopNotify()
	}()

	args := []string{
		"--etcd-servers=" + st.Etcd,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", st.SecurePort),
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--authorization-mode=Node,RBAC",
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=" + st.ServiceClusterIPRange,
		// The endpoint reconciler would write 127.0.0.1 into the "kubernetes"
		// Service's EndpointSlice, which validation refuses (loopback); the
		// Service is created without endpoints instead.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		fmt.Sprintf("-v=%d", *verbosity),
	}
	args = append(args, extra...)

	ctx, stopWaiting := context.WithCancel(context.Background())
	defer stopWaiting()
	go announceWhenReady(ctx, dir, st)

	command := app.NewAPIServerCommand()
	command.SetArgs(args)
	code := cli.Run(command)
	return code
}

// prepare creates the state directory's contents on first use and returns the
// state, reusing the ports and token recorded by an earlier run.
func prepare(dir string, securePort, etcdPort int, serviceRange string) (*state, error) {
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o700); err != nil {
		return nil, err
	}
	st := &state{}
	if data, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil {
		if err := json.Unmarshal(data, st); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "state.json"), err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var err error
	if securePort != 0 {
		st.SecurePort = securePort
	}
	if etcdPort != 0 {
		st.EtcdClientPort = etcdPort
	}
	for _, p := range []*int{&st.SecurePort, &st.EtcdClientPort, &st.EtcdPeerPort} {
		if *p == 0 {
			if *p, err = freePort(); err != nil {
				return nil, err
			}
		}
	}
	st.Server = fmt.Sprintf("https://127.0.0.1:%d", st.SecurePort)
	st.Etcd = fmt.Sprintf("http://127.0.0.1:%d", st.EtcdClientPort)
	st.StateDir = dir
	st.ServiceClusterIPRange = serviceRange
	st.CA = filepath.Join(dir, "certs", "apiserver.crt")
	st.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	st.PID = os.Getpid()
	if st.AdminToken == "" {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		st.AdminToken = hex.EncodeToString(b)
	}
	tokens := fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n", st.AdminToken)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "sa.key")
	if _, err := os.Stat(keyFile); errors.Is(err, os.ErrNotExist) {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
		if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
			return nil, err
		}
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
current-context: test
`, st.Server, st.CA, st.AdminToken)
	if err := os.WriteFile(st.Kubeconfig, []byte(kubeconfig), 0o600); err != nil {
		return nil, err
	}
	return st, nil
}

// freePort asks the kernel for a free TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts a single-member etcd on the state's 127.0.0.1 ports with
// its data in STATE_DIR/etcd, and waits until it serves.
func startEtcd(dir string, st *state) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.LogLevel = "error"
	client, _ := url.Parse(st.Etcd)
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", st.EtcdPeerPort))
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = "test=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(2 * time.Minute):
		e.Close()
		return nil, errors.New("not ready after 2 minutes")
	}
}

// announceWhenReady polls kube-apiserver's /readyz with the admin token and,
// once it answers 200, writes STATE_DIR/state.json and prints the READY line.
func announceWhenReady(ctx context.Context, dir string, st *state) {
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.Server+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+st.AdminToken)
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			continue
		}
		data, _ := json.Marshal(st)
		if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "test-apiserver:", err)
		}
		fmt.Println("READY " + strings.TrimSpace(string(data)))
		return
	}
}
