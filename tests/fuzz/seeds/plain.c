/* Seed of fuzz_elf: a static executable with no .dynsym (a stripped static "python3.13"). */
int counter = 3;

void _start(void);

void _start(void)
{
	for (;;)
		__asm__ volatile("" ::"r"(&counter));
}
