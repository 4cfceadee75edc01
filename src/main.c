#include <stdio.h>

#include "version.h"

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("gpu-device-plugin %s (%s)\n", GDP_VERSION, GDP_REVISION);
    return 0;
}
