/* The program's CPU view: one CPU, no masks. */
#ifndef PROGRAM_LINUX_CPUMASK_H
#define PROGRAM_LINUX_CPUMASK_H

#define num_online_cpus() 1U
#define num_possible_cpus() 1U
#define cpu_online(cpu) ((cpu) == 0)

#define for_each_cpu(cpu, mask) for ((cpu) = 0; (cpu) < 1; (cpu)++, (void)mask)
#define for_each_possible_cpu(cpu) for_each_cpu((cpu), 1)
#define for_each_online_cpu(cpu) for_each_cpu((cpu), 1)

#endif
