package train

import "time"

// IterationStats is one iteration of a job, over its workers' loops.
type IterationStats struct {
	// JCT is the latest end over the workers minus the earliest start: for
	// iteration 0 the job's start offset is left out and the send jitter
	// counted.
	JCT time.Duration `json:"jct_ns"`
	// Comm is t_comm: the earliest first push to the latest last result.
	Comm time.Duration `json:"comm_ns"`
	// Utilisation is the payload a worker received in the iteration over
	// what the link carries in Comm: ideal transfer time over actual.
	Utilisation float64 `json:"utilisation"`
	// UtilisationJCT is the same over the JCT.
	UtilisationJCT float64 `json:"utilisation_jct"`
}

// Stats is a job's iterations and their means.
type Stats struct {
	Iterations         []IterationStats
	MeanJCT            time.Duration
	MeanUtilisation    float64
	MeanUtilisationJCT float64
}

// JobStats measures a job from its workers' loops, over the iterations
// every loop has ended. payloadBytes is the result payload one worker
// receives in an iteration (the model's Bytes when nothing is lost or
// duplicated); linkRate is in bits/s (0 is DefaultLinkRate). ESA's paper
// leaves both metrics' intervals and volumes open; these are inaemu's
// readings: JCT from the iteration's start to its last forward compute,
// utilisation as throughput over the link rate.
func JobStats(loops []*Loop, payloadBytes int64, linkRate float64) Stats {
	times := make([][]IterationTimes, len(loops))
	for i, l := range loops {
		times[i] = l.hist
	}
	return StatsOf(times, payloadBytes, linkRate)
}

// StatsOf is JobStats over the workers' iteration times.
func StatsOf(workers [][]IterationTimes, payloadBytes int64, linkRate float64) Stats {
	if linkRate <= 0 {
		linkRate = DefaultLinkRate
	}
	n := -1
	for _, w := range workers {
		if n < 0 || len(w) < n {
			n = len(w)
		}
	}
	var s Stats
	var jct time.Duration
	for i := 0; i < n; i++ {
		first := workers[0][i]
		start, push, done, end := first.Start, first.FirstPush, first.LastDone, first.End
		for _, w := range workers[1:] {
			t := w[i]
			start, push = min(start, t.Start), min(push, t.FirstPush)
			done, end = max(done, t.LastDone), max(end, t.End)
		}
		it := IterationStats{JCT: end - start, Comm: done - push}
		it.Utilisation = utilisation(payloadBytes, linkRate, it.Comm)
		it.UtilisationJCT = utilisation(payloadBytes, linkRate, it.JCT)
		s.Iterations = append(s.Iterations, it)
		jct += it.JCT
		s.MeanUtilisation += it.Utilisation
		s.MeanUtilisationJCT += it.UtilisationJCT
	}
	if n > 0 {
		s.MeanJCT = jct / time.Duration(n)
		s.MeanUtilisation /= float64(n)
		s.MeanUtilisationJCT /= float64(n)
	}
	return s
}

// utilisation is (bytes × 8 / rate) / t; 0 when t is not positive.
func utilisation(bytes int64, rate float64, t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	return float64(bytes) * 8 / rate / t.Seconds()
}
