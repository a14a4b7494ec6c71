#include <doca_error.h>

static const char *const NAMES[][2] = {
	{"DOCA_SUCCESS", "Success"},
	{"DOCA_ERROR_UNKNOWN", "Unknown error"},
	{"DOCA_ERROR_NOT_PERMITTED", "Operation not permitted"},
	{"DOCA_ERROR_IN_USE", "Resource already in use"},
	{"DOCA_ERROR_NOT_SUPPORTED", "Operation not supported"},
	{"DOCA_ERROR_AGAIN", "Resource temporarily unavailable, try again"},
	{"DOCA_ERROR_INVALID_VALUE", "Invalid input"},
	{"DOCA_ERROR_NO_MEMORY", "Memory allocation failure"},
	{"DOCA_ERROR_INITIALIZATION", "Resource initialization failure"},
	{"DOCA_ERROR_TIME_OUT", "Timer expired waiting for resource"},
	{"DOCA_ERROR_SHUTDOWN", "Shut down in process or completed"},
	{"DOCA_ERROR_CONNECTION_RESET", "Connection reset by peer"},
	{"DOCA_ERROR_CONNECTION_ABORTED", "Connection aborted"},
	{"DOCA_ERROR_CONNECTION_INPROGRESS", "Connection in progress"},
	{"DOCA_ERROR_NOT_CONNECTED", "Not connected"},
	{"DOCA_ERROR_NO_LOCK", "Unable to acquire required lock"},
	{"DOCA_ERROR_NOT_FOUND", "Resource not found"},
	{"DOCA_ERROR_IO_FAILED", "Input/Output operation failed"},
	{"DOCA_ERROR_BAD_STATE", "Bad state"},
	{"DOCA_ERROR_UNSUPPORTED_VERSION", "Unsupported version"},
	{"DOCA_ERROR_OPERATING_SYSTEM", "Operating system call failure"},
	{"DOCA_ERROR_DRIVER", "DOCA Driver call failure"},
	{"DOCA_ERROR_UNEXPECTED", "Unexpected failure"},
	{"DOCA_ERROR_ALREADY_EXIST", "Resource already exists"},
	{"DOCA_ERROR_FULL", "No more space in resource"},
	{"DOCA_ERROR_EMPTY", "No entry is available in resource"},
	{"DOCA_ERROR_IN_PROGRESS", "Operation is in progress"},
	{"DOCA_ERROR_TOO_BIG", "Requested operation too big to be contained"},
};

const char *doca_error_get_name(doca_error_t e)
{
	return (unsigned)e < sizeof(NAMES) / sizeof(NAMES[0]) ? NAMES[e][0] : "DOCA_ERROR_UNKNOWN";
}

const char *doca_error_get_descr(doca_error_t e)
{
	return (unsigned)e < sizeof(NAMES) / sizeof(NAMES[0]) ? NAMES[e][1] : "Unknown error";
}
