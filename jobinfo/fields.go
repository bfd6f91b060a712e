package jobinfo

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Field maps one struct field to one data column.
type Field struct {
	// Column is the column name.
	Column string
	// GoName is the struct field's name, for error messages.
	GoName string
	// Type is the field's Go type.
	Type reflect.Type
	// Index is the field's index path for reflect.Value.FieldByIndex.
	Index []int
	// Unique marks a field of the until-executed unique key.
	Unique bool
	// Key marks a field of the concurrency key.
	Key bool

	rule goTypeRule
}

// tagName is the struct tag key jobinfo reads.
const tagName = "jobpipe"

// parseFields reads the exported fields of struct type t, reporting every problem at once.
func parseFields(t reflect.Type) ([]Field, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("jobinfo: job type %s is not a struct: define kinds from a struct type", t)
	}
	var fields []Field
	var errs []error
	seen := map[string]string{}
	for _, sf := range reflect.VisibleFields(t) {
		if !sf.IsExported() || sf.Anonymous {
			continue
		}
		f, skip, err := parseField(sf)
		if skip {
			continue
		}
		if err != nil {
			errs = append(errs, err)
		}
		if prev, dup := seen[f.Column]; dup {
			errs = append(errs, fmt.Errorf("jobinfo: fields %s and %s both map to column %q", prev, sf.Name, f.Column))
			continue
		}
		seen[f.Column] = sf.Name
		if err == nil {
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("jobinfo: job type %s has no exported fields to store: add at least one", t))
	}
	return fields, errors.Join(errs...)
}

func parseField(sf reflect.StructField) (f Field, skip bool, err error) {
	tag, tagged := sf.Tag.Lookup(tagName)
	if tag == "-" {
		return Field{}, true, nil
	}
	name, opts, _ := strings.Cut(tag, ",")
	if !tagged || name == "" {
		name = snakeCase(sf.Name)
	}
	f = Field{Column: name, GoName: sf.Name, Type: sf.Type, Index: sf.Index}
	var errs []error
	if err := ValidateName("column", name); err != nil {
		errs = append(errs, fmt.Errorf("%w (field %s)", err, sf.Name))
	} else if isPipelineColumn(name) {
		errs = append(errs, fmt.Errorf("jobinfo: field %s maps to %q, a pipeline column jobpipe manages: rename it", sf.Name, name))
	}
	if opts != "" {
		for _, opt := range strings.Split(opts, ",") {
			switch strings.TrimSpace(opt) {
			case "unique":
				f.Unique = true
			case "key":
				f.Key = true
			default:
				errs = append(errs, fmt.Errorf("jobinfo: field %s has unknown tag option %q: the options are unique and key", sf.Name, opt))
			}
		}
	}
	if f.rule, err = ruleFor(sf.Type); err != nil {
		errs = append(errs, fmt.Errorf("jobinfo: field %s: %w", sf.Name, err))
	}
	return f, false, errors.Join(errs...)
}
