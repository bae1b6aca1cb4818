package envflag

import (
	"flag"
	"strings"
	"testing"
)

func Test_Apply(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"default", nil, nil, "d", ""},
		{"own variable", nil, map[string]string{"APP_SOME_FLAG": "env"}, "env", ""},
		{"fallback", nil, map[string]string{"OTHER_NAME": "fb"}, "fb", ""},
		{"own variable beats fallback", nil, map[string]string{"APP_SOME_FLAG": "env", "OTHER_NAME": "fb"}, "env", ""},
		{"command line beats both", []string{"--some-flag", "cli"}, map[string]string{"APP_SOME_FLAG": "env"}, "cli", ""},
		{"bad value names the variable", nil, map[string]string{"APP_COUNT": "x"}, "d", "APP_COUNT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			got := fs.String("some-flag", "d", "")
			fs.Int("count", 1, "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := Apply(fs, "APP", map[string][]string{"some-flag": {"OTHER_NAME"}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want mention of %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || *got != tt.want {
				t.Fatalf("got %q, %v; want %q", *got, err, tt.want)
			}
		})
	}
}
