package uniqueness_test

import (
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
