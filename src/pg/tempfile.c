/*
 * tempfile.c — the engine's temporary files (env.h's temp_* hooks) as
 * PostgreSQL temporary files, for chunks of rows past the memory budget
 * (src/core/chunk_store_file.c).
 *
 * OpenTemporaryFile(false) makes the file: in temp_tablespaces (read by
 * PrepareTempTablespaces first, as tuplesort does; else the database's own
 * tablespace), deleted at
 * transaction end and abort (ERROR, cancel) and at backend exit, its size
 * counted in pg_stat_database.temp_bytes (and log_temp_files) when it is
 * closed.  Writes go through FileWrite, which enforces temp_file_limit; a
 * write started in the background (temp_write_start: a spilled chunk, while
 * the scan goes on) writes its last bytes through FileWrite first — the
 * limit's check and fd.c's count of the session's temporary bytes cover
 * the whole range from there — and the rest on a helper thread through the
 * second descriptor below (gbml_write_behind: pwrite only).
 * Reads do not go through the VFD layer, which is neither thread-safe nor
 * free to keep a descriptor open (it closes and reopens them LRU): a second
 * descriptor from OpenTransientFile, closed by PostgreSQL at abort, that
 * engine threads pread().  Everything here runs on the backend's thread;
 * only those preads and the background writes may run elsewhere.  A
 * background write is waited for before the file is closed, by
 * pg_temp_close and by the abort callbacks below, which PostgreSQL calls
 * before it closes the descriptors (the training's memory, which holds the
 * buffer, goes later still, or earlier through its reset callback, which
 * closes the file and so waits too).
 *
 * The hooks must not longjmp through the engine, so an ERROR raised inside
 * them is caught and handed back as an engine code and message.  That is
 * safe only for ERRORs raised before any state changed, which holds for the
 * ones caught here: FileWrite's temp_file_limit check comes before the
 * write (fd.c itself calls raising it there "a modularity violation";
 * checking the limit ourselves is not possible, as the session's total of
 * temporary bytes is private to fd.c), and OpenTemporaryFile and
 * OpenTransientFile raise theirs (out of descriptors, no temporary
 * directory) before they register anything.
 *
 * At abort PostgreSQL closes the file (its resource owner) and the read
 * descriptor (AtEOXact_Files, AtEOSubXact_Files) before the training's
 * memory context is reset, and the reset callback that then destroys the
 * store (gbml_dataset_guard) must not close them again: a descriptor number
 * may already belong to someone else.  So every open file is on a list, in
 * TopMemoryContext, that a transaction and subtransaction callback walks at
 * abort, marking the files of the aborting (sub)transaction gone; closing a
 * gone file only frees its entry.  Subtransaction ids grow monotonically and
 * PostgreSQL hands a committed subtransaction's files to its parent, so the
 * files an abort of subtransaction S closes are the ones created in S or
 * later (while S is open, every later subtransaction is inside it).
 */
#include "glue.h"

#include <fcntl.h>
#include <limits.h>

#include "write_behind.h"

#include "access/xact.h"
#include "commands/tablespace.h"
#include "lib/ilist.h"
#include "storage/fd.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

/* FileWrite takes an int: writes go in pieces of at most this */
#define WRITE_PIECE (1 << 30)

typedef struct pg_temp_file
{
	File		file;			/* the temporary file (writes, deletion, accounting) */
	int			fd;				/* a second descriptor of it: pread on any thread, background writes */
	SubTransactionId subid;		/* the subtransaction that made it */
	bool		gone;			/* an abort closed both: nothing left to close */
	gbml_write_behind behind;	/* a background write through fd (temp_write_start) */
	dlist_node	node;			/* on open_files while not gone */
} pg_temp_file;

/* The files open in this backend, newest last. */
static dlist_head open_files = DLIST_STATIC_INIT(open_files);
static bool callbacks_registered = false;

/* Marks gone (and unlists) the open files made in subtransaction `from` or later. */
static void
forget_files_from(SubTransactionId from)
{
	dlist_mutable_iter it;

	dlist_foreach_modify(it, &open_files)
	{
		pg_temp_file *t = dlist_container(pg_temp_file, node, it.cur);

		if (t->subid >= from)
		{
			/* the write must not outlive its descriptor, whose number may be reused */
			gbml_write_behind_wait(&t->behind);
			t->gone = true;
			t->file = -1;
			t->fd = -1;
			dlist_delete(&t->node);
		}
	}
}

static void
on_xact_event(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		forget_files_from(InvalidSubTransactionId);
}

static void
on_subxact_event(SubXactEvent event, SubTransactionId mySubid, SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		forget_files_from(mySubid);
}

/*
 * In a PG_CATCH block: the ERROR as a message and an engine code (the
 * temp_file_limit one gets its own), the error state cleared.
 */
static int
caught_error(MemoryContext cxt, char *msg, size_t msg_len)
{
	ErrorData  *edata;
	int			code;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	code = edata->sqlerrcode == ERRCODE_CONFIGURATION_LIMIT_EXCEEDED ? GBML_ETEMPLIMIT : GBML_EIO;
	snprintf(msg, msg_len, "%s", edata->message ? edata->message : "temporary file error");
	FreeErrorData(edata);
	return code;
}

/* Opens the file and its read descriptor; returns 0, or an engine code with msg set. */
static int
open_temp(pg_temp_file *t, char *msg, size_t msg_len)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile File file = -1;
	volatile int fd = -1;
	volatile int code = GBML_OK;

	PG_TRY();
	{
		/* as tuplesort does: OpenTemporaryFile uses temp_tablespaces only once they are prepared */
		PrepareTempTablespaces();
		file = OpenTemporaryFile(false);
		/* read-write for gbml_temp_discard's punch hole and the background writes (pg_temp_write_start) */
		fd = OpenTransientFile(FilePathName(file), O_RDWR | PG_BINARY);
		if (fd < 0)
		{
			snprintf(msg, msg_len, "could not open temporary file \"%s\" for reading: %s",
					 FilePathName(file), strerror(errno));
			code = GBML_EIO;
		}
	}
	PG_CATCH();
	{
		code = caught_error(cxt, msg, msg_len);
	}
	PG_END_TRY();
	if (code != GBML_OK && file > 0)
		FileClose(file);
	t->file = file;
	t->fd = fd;
	return code;
}

static void *
pg_temp_create(void *ctx, int *read_fd, char *msg, size_t msg_len)
{
	/* TopMemoryContext: the entry must outlive an abort that frees ctx's memory before the close */
	pg_temp_file *t = MemoryContextAllocExtended(TopMemoryContext, sizeof(pg_temp_file),
												 MCXT_ALLOC_NO_OOM | MCXT_ALLOC_ZERO);

	(void) ctx;
	if (t == NULL)
	{
		snprintf(msg, msg_len, "out of memory for a temporary file");
		return NULL;
	}
	if (!callbacks_registered)
	{
		RegisterXactCallback(on_xact_event, NULL);
		RegisterSubXactCallback(on_subxact_event, NULL);
		callbacks_registered = true;
	}
	if (open_temp(t, msg, msg_len) != GBML_OK)
	{
		pfree(t);
		return NULL;
	}
	t->subid = GetCurrentSubTransactionId();
	dlist_push_tail(&open_files, &t->node);
	*read_fd = t->fd;
	return t;
}

/* One FileWrite of at most WRITE_PIECE bytes; a short write is ENOSPC (FileWrite sets errno so). */
static int
write_piece(pg_temp_file *t, const char *buf, int amount, off_t offset, char *msg, size_t msg_len)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile int written = -1;
	volatile int code = GBML_OK;

	PG_TRY();
	{
		written = FileWrite(t->file, unconstify(char *, buf), amount, offset, WAIT_EVENT_BUFFILE_WRITE);
	}
	PG_CATCH();
	{
		code = caught_error(cxt, msg, msg_len);
	}
	PG_END_TRY();
	if (code == GBML_OK && written != amount)
	{
		int			e = errno ? errno : ENOSPC;

		snprintf(msg, msg_len, "could not write to temporary file \"%s\": %s", FilePathName(t->file), strerror(e));
		code = gbml_temp_write_code(e);
	}
	return code;
}

static int
pg_temp_write(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg, size_t msg_len)
{
	pg_temp_file *t = handle;
	const char *p = buf;

	if (t->gone)
	{
		snprintf(msg, msg_len, "the temporary file was closed by an aborted transaction");
		return GBML_EIO;
	}

	while (len > 0)
	{
		int			piece = len < WRITE_PIECE ? (int) len : WRITE_PIECE;
		int			code = write_piece(t, p, piece, (off_t) offset, msg, msg_len);

		if (code != GBML_OK)
			return code;
		p += piece;
		len -= (size_t) piece;
		offset += (uint64_t) piece;
	}
	return GBML_OK;
}

/* How many bytes at the end of a background write go through FileWrite first. */
#define ACCOUNTED_TAIL 8192

/*
 * The range's last bytes through FileWrite (temp_file_limit, the session's
 * count of temporary bytes: both see the whole range, the file's size being
 * its end), then the rest on a helper thread.  Nothing is started when that
 * first write fails.
 */
static int
pg_temp_write_start(void *ctx, void *handle, const void *buf, size_t len, uint64_t offset, char *msg,
					size_t msg_len)
{
	pg_temp_file *t = handle;
	size_t		tail = len < ACCOUNTED_TAIL ? len : ACCOUNTED_TAIL;
	int			code;

	if (t->behind.running)
	{
		snprintf(msg, msg_len, "a background write to temporary file \"%s\" is still in flight", FilePathName(t->file));
		return GBML_EIO;
	}
	code = pg_temp_write(ctx, handle, (const char *) buf + (len - tail), tail, offset + (len - tail), msg, msg_len);
	if (code != GBML_OK)
		return code;
	gbml_write_behind_start(&t->behind, t->fd, buf, len - tail, offset);
	return GBML_OK;
}

static int
pg_temp_write_wait(void *ctx, void *handle, char *msg, size_t msg_len)
{
	pg_temp_file *t = handle;
	int			e = gbml_write_behind_wait(&t->behind);

	(void) ctx;
	if (t->gone)
	{
		snprintf(msg, msg_len, "the temporary file was closed by an aborted transaction");
		return GBML_EIO;
	}
	if (e != 0)
	{
		snprintf(msg, msg_len, "could not write to temporary file \"%s\": %s", FilePathName(t->file), strerror(e));
		return gbml_temp_write_code(e);
	}
	return GBML_OK;
}

/*
 * The read descriptor first: FileClose deletes the file and reports its size
 * to the statistics.  A file an abort closed is only forgotten.
 */
static void
pg_temp_close(void *ctx, void *handle)
{
	pg_temp_file *t = handle;

	(void) ctx;
	gbml_write_behind_wait(&t->behind);
	if (!t->gone)
	{
		dlist_delete(&t->node);
		CloseTransientFile(t->fd);
		FileClose(t->file);
	}
	pfree(t);
}

void
gbml_env_bind_temp_files(gbml_env *env, MemoryContext mcxt)
{
	env->temp_create = pg_temp_create;
	env->temp_write = pg_temp_write;
	env->temp_close = pg_temp_close;
	env->temp_write_start = pg_temp_write_start;
	env->temp_write_wait = pg_temp_write_wait;
	env->temp_ctx = mcxt;
}
