package jobinfo

import (
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, input, wantErr string
	}{
		{"plain", "webhook_delivery", ""},
		{"leading underscore", "_x1", ""},
		{"max length", strings.Repeat("a", MaxNameLength), ""},
		{"empty", "", `jobinfo: kind name is empty`},
		{"too long", strings.Repeat("a", MaxNameLength+1), `is 49 bytes long: the limit is 48`},
		{"upper case", "Webhook", `kind name "Webhook" is not allowed`},
		{"sql injection", "x; DROP TABLE users", `kind name "x; DROP TABLE users" is not allowed`},
		{"quote", `a"b`, `is not allowed`},
		{"leading digit", "1abc", `is not allowed`},
		{"dot", "a.b", `is not allowed`},
		{"unicode", "jöb", `is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateName("kind", tt.input)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ValidateName(%q) = %v, want nil", tt.input, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ValidateName(%q) = %v, want error containing %q", tt.input, err, tt.wantErr)
			}
		})
	}
}

func TestSnakeCase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"CustomerID": "customer_id", "HTTPStatus": "http_status", "URL": "url", "BlogPostID": "blog_post_id",
		"Payload": "payload", "V2Count": "v2_count", "simple": "simple",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseColumnType(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want, wantErr string }{
		{"text", "text", ""},
		{"INT", "integer", ""},
		{"Double  Precision", "double precision", ""},
		{"varchar(200)", "varchar(200)", ""},
		{"numeric(10, 2)", "numeric(10,2)", ""},
		{"text[]", "text[]", ""},
		{"varchar(1,2)", "", "varchar takes one length"},
		{"text; drop table x", "", `column type "text; drop table x" is not supported`},
		{"serial", "", `column type "serial" is not supported: use one of bigint, bigint[], bool, boolean`},
	}
	for _, tt := range tests {
		got, err := ParseColumnType(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseColumnType(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseColumnType(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
