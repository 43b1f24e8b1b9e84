// Package layout holds no code: its test keeps the repository's import
// direction (wire formats at the bottom, the CLI at the top) true.
package layout
