package main

// The fake API server's certificates: a CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, written where the tests read them. ECDSA P-256
// (quick to make, for the tests); FAKE_APISERVER_KEYS=rsa2048 makes the CA's and the
// server's keys RSA 2048, as kubeadm makes a cluster's by default (encryptionAlgorithm
// RSA-2048), for benches whose client verifies what a real cluster presents.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

func pemWrite(path, typ string, der []byte) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0600)
	if err != nil {
		panic(err)
	}
	pem.Encode(f, &pem.Block{Type: typ, Bytes: der})
	f.Close()
}

// A signing key of the kind FAKE_APISERVER_KEYS names.
func signingKey() crypto.Signer {
	switch os.Getenv("FAKE_APISERVER_KEYS") {
	case "", "ecdsa-p256":
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		return k
	case "rsa2048":
		k, _ := rsa.GenerateKey(rand.Reader, 2048)
		return k
	}
	panic("FAKE_APISERVER_KEYS: ecdsa-p256 (the default) or rsa2048")
}

// A CA, a server certificate for 127.0.0.1 and localhost, and a client certificate.
func makeCerts(dir string) tls.Certificate {
	caKey := signingKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake-apiserver-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDer, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		panic(err)
	}
	ca, _ := x509.ParseCertificate(caDer)
	pemWrite(filepath.Join(dir, "ca.crt"), "CERTIFICATE", caDer)

	srvKey := signingKey()
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "fake-apiserver"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	srvDer, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, srvKey.Public(), caKey)
	if err != nil {
		panic(err)
	}

	cliKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	cliTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "fake-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	cliDer, err := x509.CreateCertificate(rand.Reader, cliTmpl, ca, &cliKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	pemWrite(filepath.Join(dir, "client.crt"), "CERTIFICATE", cliDer)
	cliKeyDer, _ := x509.MarshalECPrivateKey(cliKey)
	pemWrite(filepath.Join(dir, "client.key"), "EC PRIVATE KEY", cliKeyDer)

	return tls.Certificate{Certificate: [][]byte{srvDer}, PrivateKey: srvKey}
}
