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
		{"bad value names the variable, flag and type", nil, map[string]string{"APP_COUNT": "x"}, "d",
			`environment variable APP_COUNT="x" (for --count): want an integer`},
		{"bad duration", nil, map[string]string{"APP_WAIT": "soon"}, "d",
			`environment variable APP_WAIT="soon" (for --wait): want a duration such as 500ms or 1m30s`},
		{"bad fallback", nil, map[string]string{"OTHER_NAME": "x", "APP_FLAG_ON": "maybe"}, "d",
			`APP_FLAG_ON="maybe" (for --flag-on): want true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			got := fs.String("some-flag", "d", "")
			fs.Int("count", 1, "")
			fs.Duration("wait", 0, "")
			fs.Bool("flag-on", false, "")
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

func Test_Annotate(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("some-flag", "", "what it does")
	fs.Int("count", 1, "how many")
	Env{Prefix: "APP", Fallbacks: map[string][]string{"some-flag": {"OTHER_NAME"}}}.Annotate(fs)
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, want := range []string{"what it does (env APP_SOME_FLAG, OTHER_NAME)", "how many (env APP_COUNT)"} {
		if !strings.Contains(help.String(), want) {
			t.Fatalf("help lacks %q:\n%s", want, help.String())
		}
	}
}
