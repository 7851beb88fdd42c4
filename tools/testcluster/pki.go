package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// authority signs the cluster's certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// identity is what one certificate asserts.
type identity struct {
	file   string // base name of the .crt and .key
	cn     string
	org    string
	server bool // serverAuth; else clientAuth
	ips    []net.IP
	dns    []string
}

func newKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
}

// newAuthority makes a self-signed CA and writes it to dir/name.{crt,key}.
func newAuthority(dir, name, cn string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(5, 0, 0),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	if err := writePair(dir, name, der, key); err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key}, nil
}

// issue signs a certificate for id and writes it to dir.
func (a *authority) issue(dir string, id identity) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	subj := pkix.Name{CommonName: id.cn}
	if id.org != "" {
		subj.Organization = []string{id.org}
	}
	usage := x509.ExtKeyUsageClientAuth
	if id.server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: subj,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(5, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, BasicConstraintsValid: true,
		IPAddresses: id.ips, DNSNames: id.dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", id.file, err)
	}
	return writePair(dir, id.file, der, key)
}

func writePair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// writeServiceAccountKeys writes the key pair that signs service-account
// tokens: sa.key (private) and sa.pub.
func writeServiceAccountKeys(dir string) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// writeKubeconfig writes a kubeconfig for the client certificate pki/cert
// that talks to server.
func writeKubeconfig(path, server, pki, cert string) error {
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(pki, name))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return err
	}
	crt, err := read(cert + ".crt")
	if err != nil {
		return err
	}
	key, err := read(cert + ".key")
	if err != nil {
		return err
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: %s
  user: {client-certificate-data: %s, client-key-data: %s}
contexts:
- name: test
  context: {cluster: test, user: %s}
`, server, ca, cert, crt, key, cert)
	return os.WriteFile(path, []byte(doc), 0o600)
}
