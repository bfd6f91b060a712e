package jobinfo

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// sqlType is a PostgreSQL type a data column may have.
type sqlType struct {
	ddl string // as written in CREATE TABLE
	udt string // information_schema.columns.udt_name
}

// simpleTypes maps the accepted spellings of a column type to the type. The list is closed on purpose:
// a type name reaches DDL verbatim, so only names from this table (and the parameterised forms matched by
// paramTypePattern) are ever written.
var simpleTypes = map[string]sqlType{
	"text": {"text", "text"}, "varchar": {"varchar", "varchar"},
	"smallint": {"smallint", "int2"}, "int2": {"smallint", "int2"},
	"integer": {"integer", "int4"}, "int": {"integer", "int4"}, "int4": {"integer", "int4"},
	"bigint": {"bigint", "int8"}, "int8": {"bigint", "int8"},
	"boolean": {"boolean", "bool"}, "bool": {"boolean", "bool"},
	"real": {"real", "float4"}, "float4": {"real", "float4"},
	"double precision": {"double precision", "float8"}, "float8": {"double precision", "float8"},
	"double":  {"double precision", "float8"},
	"numeric": {"numeric", "numeric"}, "uuid": {"uuid", "uuid"},
	"jsonb": {"jsonb", "jsonb"}, "json": {"json", "json"}, "bytea": {"bytea", "bytea"},
	"timestamptz": {"timestamptz", "timestamptz"}, "timestamp": {"timestamp", "timestamp"},
	"date": {"date", "date"}, "interval": {"interval", "interval"},
	"text[]": {"text[]", "_text"}, "bigint[]": {"bigint[]", "_int8"}, "integer[]": {"integer[]", "_int4"},
	"uuid[]": {"uuid[]", "_uuid"},
}

var paramTypePattern = regexp.MustCompile(`^(varchar|numeric)\((\d{1,4})(,(\d{1,4}))?\)$`)

// ParseColumnType checks a column type written by a person (for example on the command line) and returns
// its canonical DDL spelling. It accepts the names listed by ColumnTypes and varchar(n) / numeric(p[,s]).
func ParseColumnType(s string) (string, error) {
	t, err := parseColumnType(s)
	return t.ddl, err
}

func parseColumnType(s string) (sqlType, error) {
	norm := strings.Join(strings.Fields(strings.ToLower(s)), " ")
	if t, ok := simpleTypes[norm]; ok {
		return t, nil
	}
	if m := paramTypePattern.FindStringSubmatch(strings.ReplaceAll(norm, " ", "")); m != nil {
		if m[1] == "varchar" && m[3] != "" {
			return sqlType{}, fmt.Errorf("jobinfo: column type %q: varchar takes one length, as in varchar(200)", s)
		}
		// PostgreSQL's own limits, checked here so that a migration is never written that it refuses.
		n, _ := strconv.Atoi(m[2])
		scale, _ := strconv.Atoi(cmp.Or(m[4], "0"))
		switch {
		case m[1] == "varchar" && n < 1:
			return sqlType{}, fmt.Errorf("jobinfo: column type %q: the length of a varchar must be at least 1", s)
		case m[1] == "numeric" && (n < 1 || n > 1000):
			return sqlType{}, fmt.Errorf("jobinfo: column type %q: the precision of a numeric must be from 1 to 1000", s)
		case scale > 1000:
			return sqlType{}, fmt.Errorf("jobinfo: column type %q: the scale of a numeric must be at most 1000", s)
		}
		return sqlType{ddl: m[0], udt: m[1]}, nil
	}
	return sqlType{}, fmt.Errorf("jobinfo: column type %q is not supported: use one of %s, varchar(n), numeric(p,s)",
		s, strings.Join(ColumnTypes(), ", "))
}

// ColumnTypes lists the plain column type names ParseColumnType accepts, sorted.
func ColumnTypes() []string {
	names := make([]string, 0, len(simpleTypes))
	for name := range simpleTypes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// goTypeRule says which column types a Go type can be stored in. The first entry is what the DDL
// generator writes for that Go type.
type goTypeRule struct {
	udts []string
	// nilable is whether the Go value can represent NULL (pointers, slices, maps).
	nilable bool
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	durType     = reflect.TypeFor[time.Duration]()
	rawJSONType = reflect.TypeFor[json.RawMessage]()
	bytesType   = reflect.TypeFor[[]byte]()
)

// udtDDL maps a udt name back to the DDL the generator writes for it.
var udtDDL = map[string]string{
	"text": "text", "int8": "bigint", "int4": "integer", "int2": "smallint", "bool": "boolean",
	"float8": "double precision", "float4": "real", "timestamptz": "timestamptz", "interval": "interval",
	"bytea": "bytea", "jsonb": "jsonb", "uuid": "uuid", "_text": "text[]", "_int8": "bigint[]", "_int4": "integer[]",
}

// ruleFor returns the column types a Go field type maps to, or an error naming what is supported.
func ruleFor(t reflect.Type) (goTypeRule, error) {
	nilable := false
	if t.Kind() == reflect.Pointer {
		t, nilable = t.Elem(), true
	}
	rule, err := scalarRule(t)
	rule.nilable = rule.nilable || nilable
	return rule, err
}

func scalarRule(t reflect.Type) (goTypeRule, error) {
	switch t {
	case timeType:
		return goTypeRule{udts: []string{"timestamptz", "timestamp", "date"}}, nil
	case durType:
		return goTypeRule{udts: []string{"interval", "int8"}}, nil
	case rawJSONType:
		return goTypeRule{udts: []string{"jsonb", "json"}, nilable: true}, nil
	case bytesType:
		return goTypeRule{udts: []string{"bytea"}, nilable: true}, nil
	}
	switch t.Kind() {
	case reflect.String:
		return goTypeRule{udts: []string{"text", "varchar", "bpchar", "citext", "uuid"}}, nil
	case reflect.Bool:
		return goTypeRule{udts: []string{"bool"}}, nil
	case reflect.Int, reflect.Int64:
		return goTypeRule{udts: []string{"int8"}}, nil
	case reflect.Int32:
		return goTypeRule{udts: []string{"int4"}}, nil
	case reflect.Int16:
		return goTypeRule{udts: []string{"int2"}}, nil
	case reflect.Float64:
		return goTypeRule{udts: []string{"float8", "numeric"}}, nil
	case reflect.Float32:
		return goTypeRule{udts: []string{"float4"}}, nil
	case reflect.Array:
		if t.Len() == 16 && t.Elem().Kind() == reflect.Uint8 {
			return goTypeRule{udts: []string{"uuid"}}, nil
		}
	case reflect.Slice:
		switch t.Elem().Kind() {
		case reflect.String:
			return goTypeRule{udts: []string{"_text", "_varchar", "jsonb", "json"}, nilable: true}, nil
		case reflect.Int64:
			return goTypeRule{udts: []string{"_int8", "jsonb", "json"}, nilable: true}, nil
		case reflect.Int32:
			return goTypeRule{udts: []string{"_int4", "jsonb", "json"}, nilable: true}, nil
		}
		return goTypeRule{udts: []string{"jsonb", "json"}, nilable: true}, nil
	case reflect.Map, reflect.Interface:
		return goTypeRule{udts: []string{"jsonb", "json"}, nilable: true}, nil
	case reflect.Struct:
		return goTypeRule{udts: []string{"jsonb", "json"}}, nil
	}
	return goTypeRule{}, fmt.Errorf("the Go type %s is not supported: use a string, bool, sized integer, float, "+
		"time.Time, time.Duration, []byte, [16]byte, json.RawMessage, a slice, map, struct or interface (stored as jsonb), "+
		"or a pointer to one of these", t)
}
