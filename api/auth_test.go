package api

import "testing"

func Test_BearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{Bearer("s3cret"), "s3cret", true},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"Bearer", "", false},
		{"bearer s3cret", "s3cret", true}, // RFC 7235 §2.1: the scheme is case-insensitive
		{"BEARER s3cret", "s3cret", true},
		{"Bearer  s3cret", "s3cret", true}, // 1*SP
		{"Bearers3cret", "", false},
		{"Bearerx s3cret", "", false},
		{"Basic czNjcmV0", "", false},
		{"", "", false},
	} {
		if token, ok := BearerToken(tt.header); token != tt.token || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.header, token, ok, tt.token, tt.ok)
		}
	}
}
