package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// cdfPoints is the most points one CDF line gets: enough for a smooth
// curve, few enough for a small SVG.
const cdfPoints = 400

// drawRouting writes an SVG (or a PNG, by path's extension) with two panels: the TTFT CDF of every
// strategy (log scale) and the prefix-cache hit rate of each.
func drawRouting(path string, results []*strategyResult) error {
	cdf := plot.New()
	cdf.Title.Text = "Time to first token (CDF)"
	cdf.X.Label.Text = "TTFT (ms, log scale)"
	cdf.Y.Label.Text = "share of requests"
	cdf.X.Scale = plot.LogScale{}
	cdf.X.Tick.Marker = plot.LogTicks{Prec: -1}
	cdf.Y.Min, cdf.Y.Max = 0, 1
	cdf.Legend.Top = false
	cdf.Legend.Left = false
	cdf.Legend.XOffs = -4 * vg.Millimeter
	cdf.Legend.YOffs = 4 * vg.Millimeter
	cdf.Add(plotter.NewGrid())
	for i, r := range results {
		pts := cdfXYs(r.ttft)
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		line.Color = strategyColor(i)
		line.Width = vg.Points(1.6)
		if r.Name == strategyGreedyPrefix {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		cdf.Add(line)
		cdf.Legend.Add(r.Name, line)
	}

	bars := plot.New()
	bars.Title.Text = "Prefix-cache hit rate (prompt tokens)"
	bars.Y.Label.Text = "hit rate"
	bars.Y.Min = 0
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = r.Name
		v, err := plotter.NewBarChart(plotter.Values{r.Figures.HitRate}, vg.Points(26))
		if err != nil {
			return err
		}
		v.XMin = float64(i)
		v.Color = strategyColor(i)
		v.LineStyle.Width = 0
		bars.Add(v)
		lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(i), Y: r.Figures.HitRate}},
			Labels: []string{fmt.Sprintf("%.2f", r.Figures.HitRate)}})
		if err != nil {
			return err
		}
		lbl.Offset = vg.Point{X: -vg.Points(9), Y: vg.Points(3)}
		bars.Add(lbl)
	}
	bars.NominalX(names...)
	bars.X.Tick.Label.Rotation = 0.5
	bars.X.Tick.Label.XAlign = draw.XRight
	bars.X.Tick.Label.YAlign = draw.YCenter

	const w, h = 11 * vg.Inch, 4.4 * vg.Inch
	var img interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		img = vgsvg.New(w, h)
	case ".png":
		img = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("%s: the picture is .svg or .png", path)
	}
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: 8 * vg.Millimeter, PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter,
		PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align([][]*plot.Plot{{cdf, bars}}, tiles, dc)
	cdf.Draw(canvases[0][0])
	bars.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// cdfXYs samples a sorted set of durations as (ms, cumulative share).
func cdfXYs(sorted []time.Duration) plotter.XYs {
	n := len(sorted)
	if n == 0 {
		return nil
	}
	step := max(1, n/cdfPoints)
	var pts plotter.XYs
	for i := 0; i < n; i += step {
		pts = append(pts, plotter.XY{X: max(ms(sorted[i]), 0.001), Y: float64(i+1) / float64(n)})
	}
	if last := pts[len(pts)-1]; last.Y < 1 {
		pts = append(pts, plotter.XY{X: max(ms(sorted[n-1]), 0.001), Y: 1})
	}
	return pts
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// strategyColor gives each strategy of the table the same colour in both
// panels.
func strategyColor(i int) color.Color { return plotutil.Color(i) }
