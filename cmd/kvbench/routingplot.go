package main

import (
	"context"
	"fmt"
	"image/color"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
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

// drawRouting writes an SVG (or a PNG, by path's extension) with two
// panels: the TTFT CDF of every strategy (log scale) and the prefix-cache
// hit rate of each, under the trace's infinite-cache bound.
func drawRouting(path string, run *routingRun) error {
	results := run.results
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
	for _, r := range results {
		pts := cdfXYs(r.ttft)
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		styleLine(line, r)
		cdf.Add(line)
		cdf.Legend.Add(r.Display, line)
	}

	bars := plot.New()
	bars.Title.Text = "Prefix-cache hit rate (prompt tokens)"
	bars.Y.Label.Text = "hit rate"
	bars.Y.Min = 0
	names := make([]string, len(results))
	for i, r := range results {
		names[i] = r.Display
		v, err := plotter.NewBarChart(plotter.Values{r.Figures.HitRate}, vg.Points(26))
		if err != nil {
			return err
		}
		v.XMin = float64(i)
		v.Color = strategyColor(r.order)
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
	if len(results) > 0 {
		bound, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: run.bound}, {X: float64(len(results)) - 0.5, Y: run.bound}})
		if err != nil {
			return err
		}
		bound.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		bound.Width = vg.Points(1)
		bars.Add(bound)
		bars.Legend.Add(fmt.Sprintf("infinite-cache bound %.2f", run.bound), bound)
		bars.Legend.Top = true
		bars.Y.Max = max(bars.Y.Max, run.bound*1.15)
	}
	bars.NominalX(names...)
	bars.X.Tick.Label.Rotation = 0.5
	bars.X.Tick.Label.XAlign = draw.XRight
	bars.X.Tick.Label.YAlign = draw.YCenter

	return savePlots(path, [][]*plot.Plot{{cdf, bars}}, 11*vg.Inch, 4.4*vg.Inch)
}

// savePlots lays plots out in a grid of w × h and writes it as SVG or
// PNG, by path's extension.
func savePlots(path string, grid [][]*plot.Plot, w, h vg.Length) error {
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
	tiles := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadX: 8 * vg.Millimeter, PadY: 8 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 2 * vg.Millimeter}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
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

// drawSweep draws, for each fleet of the sweep, TTFT p90 (log scale) and
// goodput against offered load, a line per strategy, goodput under the
// offered load itself.
func drawSweep(path string, points []*sweepPoint, bound time.Duration) error {
	var fleets []string
	for _, p := range points {
		if !slices.Contains(fleets, p.Fleet) {
			fleets = append(fleets, p.Fleet)
		}
	}
	if len(fleets) == 0 {
		return fmt.Errorf("no point to draw")
	}
	var grid [][]*plot.Plot
	for _, fleet := range fleets {
		ttft, good := plot.New(), plot.New()
		ttft.Title.Text = fleet + " fleet: TTFT p90"
		ttft.X.Label.Text = "offered load (requests/s)"
		ttft.Y.Label.Text = "TTFT p90 (ms, log scale)"
		ttft.Y.Scale = plot.LogScale{}
		ttft.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		good.Title.Text = fmt.Sprintf("%s fleet: goodput (TTFT <= %s, 503s count as misses)", fleet, bound)
		good.X.Label.Text = "offered load (requests/s)"
		good.Y.Label.Text = "requests/s served within the bound"
		good.Y.Min = 0
		ttft.Legend.Top, ttft.Legend.Left = true, true
		good.Legend.Top, good.Legend.Left = true, true
		ttft.Add(plotter.NewGrid())
		good.Add(plotter.NewGrid())
		var offered plotter.XYs
		byStrategy := map[string]plotter.XYs{}
		goodBy := map[string]plotter.XYs{}
		var order []*strategyResult
		for _, p := range points {
			if p.Fleet != fleet {
				continue
			}
			offered = append(offered, plotter.XY{X: p.Offered, Y: p.Offered})
			for _, r := range p.results {
				if _, seen := byStrategy[r.Name]; !seen {
					order = append(order, r)
				}
				byStrategy[r.Name] = append(byStrategy[r.Name], plotter.XY{X: p.Offered, Y: max(r.Figures.TTFTp90, 1)})
				goodBy[r.Name] = append(goodBy[r.Name], plotter.XY{X: p.Offered, Y: r.Goodput.Rate})
			}
		}
		if len(offered) > 1 {
			diag, err := plotter.NewLine(offered)
			if err != nil {
				return err
			}
			diag.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			diag.Color = color.Gray{Y: 140}
			good.Add(diag)
			good.Legend.Add("offered", diag)
		}
		for _, r := range order {
			for _, pl := range []struct {
				p   *plot.Plot
				xys plotter.XYs
			}{{ttft, byStrategy[r.Name]}, {good, goodBy[r.Name]}} {
				line, pts, err := plotter.NewLinePoints(pl.xys)
				if err != nil {
					return err
				}
				styleLine(line, r)
				pts.Color = line.Color
				pts.Shape = draw.CircleGlyph{}
				pts.Radius = vg.Points(2)
				pl.p.Add(line, pts)
				pl.p.Legend.Add(r.Display, line, pts)
			}
		}
		grid = append(grid, []*plot.Plot{ttft, good})
	}
	return savePlots(path, grid, 12*vg.Inch, vg.Length(len(grid))*5*vg.Inch)
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

// strategyPalette is Tableau's ten colours: one per strategy, none twice
// (plotutil's palette has seven).
var strategyPalette = []color.Color{
	color.RGBA{0x4e, 0x79, 0xa7, 0xff}, color.RGBA{0xf2, 0x8e, 0x2b, 0xff}, color.RGBA{0xe1, 0x57, 0x59, 0xff},
	color.RGBA{0x76, 0xb7, 0xb2, 0xff}, color.RGBA{0x59, 0xa1, 0x4f, 0xff}, color.RGBA{0xed, 0xc9, 0x48, 0xff},
	color.RGBA{0xb0, 0x7a, 0xa1, 0xff}, color.RGBA{0xff, 0x9d, 0xa7, 0xff}, color.RGBA{0x9c, 0x75, 0x5f, 0xff},
	color.RGBA{0xba, 0xb0, 0xac, 0xff},
}

// strategyColor gives each strategy the same colour in every panel and
// every picture: its place in allStrategies.
func strategyColor(order int) color.Color { return strategyPalette[max(order, 0)%len(strategyPalette)] }

// styleLine draws a strategy's line in its colour; the baselines that see
// what no router sees (every cache, the true engine load) dashed.
func styleLine(line *plotter.Line, r *strategyResult) {
	line.Color = strategyColor(r.order)
	line.Width = vg.Points(1.6)
	if r.Name == strategyGreedyPrefix || r.Name == strategyLeastLoaded {
		line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
}
