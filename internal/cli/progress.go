package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// progressFlag defines --progress on fs: whether long work (bulk retry, prune) draws a progress bar
// on standard error. "auto" draws it when standard error is a terminal, so scripts and logs get none.
func progressFlag(fs *flag.FlagSet) *string {
	return fs.String("progress", "auto", "draw a progress bar on stderr: auto (when it is a terminal), always or never")
}

// progressMode checks a --progress value and says whether to draw. Its error is for a usageError.
func (e *env) progressMode(value string) (bool, error) {
	switch value {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		f, ok := e.Stderr.(*os.File)
		if !ok {
			return false, nil
		}
		st, err := f.Stat()
		return err == nil && st.Mode()&os.ModeCharDevice != 0, nil
	}
	return false, fmt.Errorf("--progress %q: want auto, always or never", value)
}

// progressBar draws "label [#####.....]  42% 420/1000" on one line of w, redrawn in place.
type progressBar struct {
	w     io.Writer // nil: draw nothing
	label string
	drawn bool
}

const progressWidth = 30

func newProgressBar(e *env, draw bool, label string) *progressBar {
	if !draw {
		return &progressBar{}
	}
	return &progressBar{w: e.Stderr, label: label}
}

// update redraws the bar for done of total; total 0 draws a bar full at once.
func (p *progressBar) update(done, total int64) {
	if p.w == nil {
		return
	}
	pct := int64(100)
	if total > 0 {
		pct = min(100, done*100/total)
	}
	filled := int(pct) * progressWidth / 100
	fmt.Fprintf(p.w, "\r%s [%s%s] %3d%% %d/%d", p.label,
		strings.Repeat("#", filled), strings.Repeat(".", progressWidth-filled), pct, done, total)
	p.drawn = true
}

// done ends the bar's line, so what follows starts on a line of its own.
func (p *progressBar) done() {
	if p.w != nil && p.drawn {
		fmt.Fprintln(p.w)
	}
}
