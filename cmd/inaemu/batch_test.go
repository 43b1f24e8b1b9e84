package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The batch examples in contrib/batch run as written: each shard command
// of the Kubernetes Indexed Job and of the Slurm array runs with the
// index the batch system would set (a small count, a temporary directory
// for the shared volume), the shard count matches the job's size, and
// the reports merge; the CI matrix has as many entries as its shards.
func TestBatchExamplesRun(t *testing.T) {
	bin := inaemuBinary(t)
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	small := strings.NewReplacer("--count 100000", "--count 3", "--count 5000", "--count 3", "--suite all", "--suite gbn")
	shardN := regexp.MustCompile(`--shard (\d+)\b`)

	// Kubernetes
	b, err := os.ReadFile("../../contrib/batch/conformance-indexed-job.yaml")
	require.NoError(t, err)
	var job struct {
		Spec struct {
			CompletionMode string `yaml:"completionMode"`
			Completions    int    `yaml:"completions"`
			Template       struct {
				Spec struct {
					Containers []struct {
						Command []string `yaml:"command"`
						Args    []string `yaml:"args"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &job))
	require.Equal(t, "Indexed", job.Spec.CompletionMode)
	c := job.Spec.Template.Spec.Containers[0]
	require.Equal(t, []string{"/bin/sh", "-c"}, c.Command)
	m := shardN.FindStringSubmatch(c.Args[0])
	require.NotNil(t, m, c.Args[0])
	require.Equal(t, strconv.Itoa(job.Spec.Completions), m[1], "--shard N is the Job's completions")
	reports := t.TempDir()
	script := strings.ReplaceAll(small.Replace(c.Args[0]), "/reports", reports)
	for i := range job.Spec.Completions {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+path, "JOB_COMPLETION_INDEX="+strconv.Itoa(i))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "pod %d: %s", i, out)
	}
	files, _ := filepath.Glob(filepath.Join(reports, "shard-*.json"))
	require.Len(t, files, job.Spec.Completions)
	code, out, errOut := runCLI(append([]string{"merge"}, files...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "gbn")
	require.Contains(t, out, "holds (3 cases")

	// Slurm
	sh, err := os.ReadFile("../../contrib/batch/conformance-slurm.sh")
	require.NoError(t, err)
	m = shardN.FindStringSubmatch(string(sh))
	require.NotNil(t, m)
	n, _ := strconv.Atoi(m[1])
	work := t.TempDir()
	for i := range n {
		cmd := exec.Command("/bin/sh", "-c", small.Replace(string(sh)))
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+path, "SLURM_ARRAY_TASK_ID="+strconv.Itoa(i+10), "SLURM_ARRAY_TASK_MIN=10")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "task %d: %s", i, out)
	}
	files, _ = filepath.Glob(filepath.Join(work, "reports", "shard-*.json"))
	require.Len(t, files, n)
	code, _, errOut = runCLI(append([]string{"merge"}, files...)...)
	require.Equal(t, 0, code, errOut)

	// CI matrix
	b, err = os.ReadFile("../../contrib/batch/conformance-matrix.yml")
	require.NoError(t, err)
	var wf struct {
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Shard []int `yaml:"shard"`
				} `yaml:"matrix"`
			} `yaml:"strategy"`
			Steps []struct {
				Run string `yaml:"run"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &wf))
	shards := wf.Jobs["shard"].Strategy.Matrix.Shard
	found := false
	for _, s := range wf.Jobs["shard"].Steps {
		if m := regexp.MustCompile(`--shard \$\{\{ matrix.shard \}\}/(\d+)`).FindStringSubmatch(s.Run); m != nil {
			require.Equal(t, strconv.Itoa(len(shards)), m[1])
			found = true
		}
	}
	require.True(t, found, "a step runs the shard")
	require.Contains(t, wf.Jobs["merge"].Steps[len(wf.Jobs["merge"].Steps)-1].Run, "merge")
}
