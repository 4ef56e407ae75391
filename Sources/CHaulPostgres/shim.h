// libpq, PostgreSQL's C client (Debian's libpq-dev), for HaulPostgres only: the core library and
// `haul` never link it. It includes <stdio.h> only, so it does not clash with CHaul's headers.
#include <libpq-fe.h>
