package main

import (
	"bytes"
	"fmt"
	"math"
)

// series is one line of a panel.
type series struct {
	name  string
	color string
	xs    []float64
	ys    []float64
}

// panel is one small chart with a logarithmic x axis.
type panel struct {
	title, xlabel, ylabel string
	lines                 []series
}

const (
	panelW, panelH = 300, 220
	padL, padB     = 52, 40
	padT, padR     = 28, 10
)

// svg draws the cost curve as three panels side by side: bytes and client
// CPU per hand-off by queue length, and the idle cost of held leases.
func (cc *costCurve) svg() []byte {
	byKind := func(kind string, y func(queuePoint) float64) (xs, ys []float64) {
		for _, p := range cc.Queue {
			if p.Kind == kind {
				xs, ys = append(xs, float64(p.W)), append(ys, y(p))
			}
		}
		return xs, ys
	}
	line := func(kind, color string, y func(queuePoint) float64) series {
		xs, ys := byKind(kind, y)
		return series{kind, color, xs, ys}
	}
	var hx, heap, idle []float64
	for _, p := range cc.Held {
		hx, heap, idle = append(hx, float64(p.K)), append(heap, p.HeapPer/100), append(idle, p.IdleCPU)
	}
	panels := []panel{
		{"bytes per hand-off", "workers queued (W)", "bytes",
			[]series{line(kindZklock, "#1f77b4", func(p queuePoint) float64 { return p.Bytes }), line(kindZkLock, "#d62728", func(p queuePoint) float64 { return p.Bytes })}},
		{"client CPU per hand-off", "workers queued (W)", "µs",
			[]series{line(kindZklock, "#1f77b4", func(p queuePoint) float64 { return p.CPUus }), line(kindZkLock, "#d62728", func(p queuePoint) float64 { return p.CPUus })}},
		{"one client holding K leases", "leases held (K)", "",
			[]series{{"heap per lease (100 B)", "#2ca02c", hx, heap}, {"idle CPU (ms/s)", "#9467bd", hx, idle}}},
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", len(panels)*panelW, panelH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, p := range panels {
		p.draw(&b, float64(i*panelW))
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func (p panel) draw(b *bytes.Buffer, x0 float64) {
	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range p.lines {
		for i := range s.xs {
			xmin, xmax, ymax = math.Min(xmin, s.xs[i]), math.Max(xmax, s.xs[i]), math.Max(ymax, s.ys[i])
		}
	}
	if xmax <= xmin || ymax <= 0 {
		return
	}
	ymax = niceCeil(ymax)
	w, h := float64(panelW-padL-padR), float64(panelH-padT-padB)
	px := func(x float64) float64 { return x0 + padL + w*math.Log(x/xmin)/math.Log(xmax/xmin) }
	py := func(y float64) float64 { return padT + h*(1-y/ymax) }
	fmt.Fprintf(b, `<text x="%.0f" y="16" font-size="12" font-weight="bold">%s</text>`+"\n", x0+padL, p.title)
	fmt.Fprintf(b, `<rect x="%.0f" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", x0+padL, padT, w, h)
	for _, y := range []float64{0, ymax / 2, ymax} {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", x0+padL-4, py(y)+4, compact(y))
	}
	for x := xmin; x <= xmax*1.0001; x *= 10 {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>`+"\n", px(x), padT+h+14, compact(x))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+padL+w/2, panelH-6, p.xlabel)
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" transform="rotate(-90 %.0f %.0f)">%s</text>`+"\n",
		x0+12, padT+h/2, x0+12, padT+h/2, p.ylabel)
	for i, s := range p.lines {
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, s.color)
		for j := range s.xs {
			fmt.Fprintf(b, "%.1f,%.1f ", px(s.xs[j]), py(s.ys[j]))
		}
		b.WriteString(`"/>` + "\n")
		fmt.Fprintf(b, `<text x="%.0f" y="%d" fill="%s">%s</text>`+"\n", x0+padL+6, padT+14+14*i, s.color, s.name)
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func compact(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}
