package api

import "testing"

func Test_BearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, token string
		ok            bool
	}{
		{Bearer("s3cret"), "s3cret", true},
		{"Bearer ", "", false},
		{"bearer s3cret", "", false},
		{"Basic czNjcmV0", "", false},
		{"", "", false},
	} {
		if token, ok := BearerToken(tt.header); token != tt.token || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.header, token, ok, tt.token, tt.ok)
		}
	}
}
