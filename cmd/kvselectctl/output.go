package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kvselect/kvselect/client"
)

// printer writes a command's result: a table for people, or with --json
// the server's JSON, indented.
type printer struct {
	w    io.Writer
	json bool
}

func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// show makes one API call and prints its result: the server's JSON with
// --json, else render applied to the typed result and what the answer said
// besides (the index and node of a write).
func show[T any](e *env, call func(ctx context.Context, c *client.Client) (T, error),
	render func(p *printer, v T, info *client.ResponseInfo) error) error {
	c, err := e.client()
	if err != nil {
		return err
	}
	var info client.ResponseInfo
	v, err := call(client.WithResponseInfo(e.ctx, &info), c)
	if err != nil {
		return err
	}
	p := e.out()
	if p.json {
		return p.indented(info.Body)
	}
	return render(p, v, &info)
}

// indented prints a JSON body indented.
func (p *printer) indented(body []byte) error {
	_, err := p.w.Write(indentJSON(body))
	return err
}

// indentJSON is a JSON body indented by two spaces, ending in a newline:
// every --json output has this form. A body that is not JSON is returned
// as it is.
func indentJSON(body []byte) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		return body
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}

// table prints a header and rows, aligned, without trailing blanks.
func (p *printer) table(header []string, rows [][]string) error {
	var buf bytes.Buffer
	tw := newTabWriter(&buf)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(buf.String()) {
		if _, err := fmt.Fprintln(p.w, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	return nil
}

func (p *printer) linef(format string, args ...any) {
	fmt.Fprintf(p.w, format+"\n", args...)
}

// applied prints where a write landed, from the X-Kvselect-Index and
// X-Kvselect-Served-By headers: "applied at index 12 by n1". index is the
// fallback when the header is missing (the body's catalog_index).
func (p *printer) applied(info *client.ResponseInfo, index uint64) {
	idx, by := info.CatalogIndex, info.ServedBy
	if idx == 0 {
		idx = index
	}
	switch {
	case idx != 0 && by != "":
		p.linef("applied at index %d by %s", idx, by)
	case idx != 0:
		p.linef("applied at index %d", idx)
	case by != "":
		p.linef("applied by %s", by)
	}
	if info.NotApplied {
		p.linef("(%s had not applied it yet when it answered; reads there may lag for a moment)", info.Node)
	}
}

// orDash shows an empty cell as "-".
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func formatUint(v uint64) string { return strconv.FormatUint(v, 10) }

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
