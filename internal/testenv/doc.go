// Package testenv gives jobpipe's tests real servers and keeps the tests apart from one another.
//
// It owns three things:
//
//   - Finding PostgreSQL and Redis, once per test process. In order: the servers named by
//     TEST_DATABASE_URL and TEST_REDIS_URL; local servers on the default ports
//     (127.0.0.1:5432, 127.0.0.1:6379) when they answer; containers started through
//     testcontainers-go when a Docker or Podman runtime answers. JOBPIPE_TEST_SERVERS
//     (auto, env, local or containers) forces one of those ways.
//   - Isolation, so that tests can run in parallel against shared servers: [NewSchema] gives a
//     test its own PostgreSQL schema and [NewRedis] its own Redis key prefix; both are removed
//     when the test ends.
//   - Throw-away Redis nodes for the Redlock and fault tests ([StartRedisNodes]): processes this
//     package starts, can kill, restart, stop and continue, and always kills at the end.
//
// Every test package that uses it calls [Main] from its TestMain, which terminates the
// containers this package started and then checks that no goroutine leaked:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// Environment variables read:
//
//	TEST_DATABASE_URL            PostgreSQL connection string (URL or key=value form)
//	TEST_REDIS_URL               Redis nodes, comma-separated: host:port or redis://[:password@]host:port[/db]
//	JOBPIPE_TEST_SERVERS         auto (default) | env | local | containers
//	JOBPIPE_TEST_POSTGRES_IMAGE  image for the PostgreSQL container (default postgres:16-alpine)
//	JOBPIPE_TEST_REDIS_IMAGE     image for the Redis container (default redis:7-alpine)
//
// testcontainers-go itself reads DOCKER_HOST, TESTCONTAINERS_RYUK_DISABLED and the other
// variables it documents.
package testenv
