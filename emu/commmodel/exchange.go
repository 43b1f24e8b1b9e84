package commmodel

import "math"

// INCEPTIONN's gradient-exchange model (MICRO '18 §VIII-D, "adopting the
// communication models in [24]", Thakur et al.): p workers exchange n
// bytes each; α is a link's latency, β a byte's transfer time and γ a
// byte's reduction time. The paper does not name the logarithm's base;
// base 2 is taken (binomial trees).
//
//	WA (worker-aggregator): (1 + log p)·α + (p + log p)·n·β + (p − 1)·n·γ
//	INCEPTIONN (the ring):  2(p − 1)·α + 2(p − 1)/p·n·β + (p − 1)/p·n·γ
//
// WA's terms read as a gather of p·n bytes through the aggregator's link
// (one α) and a binomial broadcast in log p steps of n bytes. With the
// aggregator a node of its own, a binomial tree over it and the p workers
// has ceil(log2(p+1)) levels, not log p (3 for p = 4, 4 for p = 8):
// WATree is the model with that count, WAUnicast the aggregator sending
// to every worker in turn (2p·n·β: Table II's measured times fit it), and
// WAWorkerTree the broadcast that takes log p steps: the aggregator
// streams the sum to one worker while it gathers, and a binomial tree over
// the p workers follows (ceil(log2 p) steps: WA itself for p a power of 2).

// Exchange are the model's inputs (seconds, bytes).
type Exchange struct {
	Workers int     // p
	Bytes   float64 // n
	Alpha   float64 // α, s
	Beta    float64 // β, s/B
	Gamma   float64 // γ, s/B
}

// ExchangeTime is a model's time by term.
type ExchangeTime struct {
	Latency, Bandwidth, Reduce, Total float64
}

func exchange(lat, bw, red float64) ExchangeTime {
	return ExchangeTime{Latency: lat, Bandwidth: bw, Reduce: red, Total: lat + bw + red}
}

// WA is §VIII-D's worker-aggregator time.
func WA(e Exchange) ExchangeTime { return waSteps(e, math.Log2(float64(e.Workers))) }

// WATree is WA with the broadcast's log p replaced by the levels of a
// binomial tree over the aggregator and the p workers.
func WATree(e Exchange) ExchangeTime { return waSteps(e, math.Ceil(math.Log2(float64(e.Workers+1)))) }

// WAWorkerTree is WA with the broadcast's log p replaced by the levels of
// a binomial tree over the p workers (the first hop hidden in the gather).
func WAWorkerTree(e Exchange) ExchangeTime {
	return waSteps(e, math.Ceil(math.Log2(float64(e.Workers))))
}

// waSteps is WA with a broadcast of l steps.
func waSteps(e Exchange, l float64) ExchangeTime {
	p := float64(e.Workers)
	return exchange((1+l)*e.Alpha, (p+l)*e.Bytes*e.Beta, (p-1)*e.Bytes*e.Gamma)
}

// WAUnicast is WA with the sum sent to each worker in turn.
func WAUnicast(e Exchange) ExchangeTime {
	p := float64(e.Workers)
	return exchange((1+p)*e.Alpha, 2*p*e.Bytes*e.Beta, (p-1)*e.Bytes*e.Gamma)
}

// RingExchange is §VIII-D's INCEPTIONN time (Ring-AllReduce).
func RingExchange(e Exchange) ExchangeTime {
	p := float64(e.Workers)
	return exchange(2*(p-1)*e.Alpha, 2*(p-1)/p*e.Bytes*e.Beta, (p-1)/p*e.Bytes*e.Gamma)
}
