/* Seed of fuzz_elf: "python3.12" that loads libpython3.12 (DT_NEEDED), no runtime of its own. */
extern struct object {
	char bytes[32];
} PyLong_Type;

void _start(void);

void _start(void)
{
	for (;;)
		__asm__ volatile("" ::"r"(&PyLong_Type));
}
