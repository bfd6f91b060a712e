package metrics

// kindNamesSQL lists the registered kinds by name. Used when admin.Kinds fails on one kind whose
// table is missing, so that the others are still read one by one.
const kindNamesSQL = `SELECT name FROM jobpipe_kinds ORDER BY name`
