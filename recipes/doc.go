// Package recipes is perfscope's recipe language: a recipe file decoded
// and checked field by field (decode), its parameters' kinds and domains
// (values), the probes and collectors a recipe may name with their
// options (catalog), the rules it may select (rules), its values bound
// into a Plan checked against the system (bind, plan), and the built-in
// recipes every measuring command follows (builtin). A Plan builds the
// parts of package measure, runs them and judges their evidence with the
// rules the recipe chose; measure never imports recipes.
package recipes
