/* CRC-32 with the polynomial of zlib (reflected 0xEDB88320), so that Python's zlib.crc32
 * checks the journal's records independently of this code. */
#include "core/rmt_private.h"

static uint32_t table[256];
static int ready;

static void init_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
}

uint32_t rmt_crc32(uint32_t crc, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE))
        init_table();    /* threads racing here compute the same table */
    crc = ~crc;
    while (n--)
        crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
