package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
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

// show prints resp: its JSON with --json, else render applied to the
// decoded body.
func show[T any](p *printer, resp *response, render func(p *printer, v T) error) error {
	if p.json {
		return p.indented(resp.body)
	}
	var v T
	if err := json.Unmarshal(resp.body, &v); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	return render(p, v)
}

// indented prints a JSON body indented; a body that is not JSON is printed
// as it is.
func (p *printer) indented(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		_, err = p.w.Write(body)
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(p.w)
	return err
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
func (p *printer) applied(resp *response, index uint64) {
	idx := resp.header.Get(headerIndex)
	if idx == "" && index > 0 {
		idx = strconv.FormatUint(index, 10)
	}
	by := resp.header.Get(headerServed)
	switch {
	case idx != "" && by != "":
		p.linef("applied at index %s by %s", idx, by)
	case idx != "":
		p.linef("applied at index %s", idx)
	case by != "":
		p.linef("applied by %s", by)
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
