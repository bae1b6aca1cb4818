// Package testpki makes throwaway certificate authorities and loopback
// certificates for tests of kvselect's HTTPS (SPEC §11): a CA, and leaf
// certificates it signs for 127.0.0.1, ::1 and localhost, written as PEM
// files where --tls-cert-file, --tls-key-file and --tls-ca-file (or a
// client's CA option) can read them. Nothing here is fit to protect
// anything: keys are generated per test and live in its temporary
// directory.
package testpki
