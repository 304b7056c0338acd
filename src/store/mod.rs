//! The SQLite store: schema, migrations, queries and full-text search.
