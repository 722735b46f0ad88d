//! The placeholders of multi-row statements, in each database's form.
//!
//! PostgreSQL numbers its parameters (`$1`, `$2`, ...). SQLite accepts the
//! same text but takes `$1` as a parameter named "$1", and binding a
//! statement's named parameters looks each name up in a list of all of
//! them: a statement of `n` parameters costs `n²` to bind. An insert of 400
//! received spans (7,200 values) spent most of the receiver's CPU there, so
//! SQLite gets anonymous `?` parameters, bound in order at no search.

use super::Backend;
use std::fmt::Write;

/// Rows per multi-row statement: far under SQLite's and PostgreSQL's
/// limits on bound values.
pub(super) const ROWS_PER_STATEMENT: usize = 100;

/// `rows` tuples of `width` placeholders: `($1, $2), ($3, $4)` on
/// PostgreSQL, `(?, ?), (?, ?)` on SQLite. The values are bound in the
/// same order either way.
pub(super) fn value_tuples(backend: Backend, rows: usize, width: usize) -> String {
    value_tuples_after(backend, 0, rows, width)
}

/// [`value_tuples`] in a statement that binds `before` values ahead of
/// them: on PostgreSQL the first tuple starts at `$before + 1`.
pub(super) fn value_tuples_after(
    backend: Backend,
    before: usize,
    rows: usize,
    width: usize,
) -> String {
    let mut out = String::with_capacity(rows * width * 5);
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for c in 0..width {
            if c > 0 {
                out.push_str(", ");
            }
            match backend {
                Backend::Sqlite => out.push('?'),
                // Writing to a `String` cannot fail.
                Backend::Postgres => {
                    let _ = write!(out, "${}", before + r * width + c + 1);
                }
            }
        }
        out.push(')');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_numbers_its_parameters_and_sqlite_binds_them_in_order() {
        assert_eq!(
            value_tuples(Backend::Postgres, 2, 3),
            "($1, $2, $3), ($4, $5, $6)"
        );
        assert_eq!(value_tuples(Backend::Sqlite, 2, 2), "(?, ?), (?, ?)");
        assert_eq!(value_tuples(Backend::Sqlite, 0, 2), "");
        assert_eq!(
            value_tuples_after(Backend::Postgres, 3, 2, 2),
            "($4, $5), ($6, $7)"
        );
        assert_eq!(value_tuples_after(Backend::Sqlite, 3, 1, 2), "(?, ?)");
    }
}
