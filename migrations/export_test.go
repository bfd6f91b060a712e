package migrations

// OwnFS exposes jobpipe's embedded migrations, exactly as goose reads them, to the external test
// package, so its expectations follow the migration list as it grows.
var OwnFS = ownFS
