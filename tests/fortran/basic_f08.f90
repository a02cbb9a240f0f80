! Fortran 2008 through `use mpi_f08` (MPICH's mpi_f08 module over its C bindings, on
! Kestrel's libmpich.so.12): derived-type handles (TYPE(MPI_Status), TYPE(MPI_Request)),
! optional ierror, Allreduce, Iallreduce with Wait, Send/Recv with wildcards and the status
! fields (MPI_SOURCE, MPI_TAG, MPI_Get_count), Barrier. A failure calls MPI_Abort; a passing
! rank prints "PASS basic_f08 rank <r>". At least 2 ranks (2 and 3 tested).
program basic_f08
  use mpi_f08
  implicit none
  integer :: rank, size, n, i
  type(MPI_Status) :: st
  type(MPI_Request) :: req
  double precision :: x, s
  integer :: buf(4)
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  x = rank + 1
  call MPI_Allreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  if (abs(s - size*(size+1)/2.0d0) > 1d-9) call MPI_Abort(MPI_COMM_WORLD, 3)
  call MPI_Iallreduce(x, s, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, req)
  call MPI_Wait(req, st)
  if (abs(s - size) > 1d-9) call MPI_Abort(MPI_COMM_WORLD, 4)
  if (rank == 0) then
    buf = (/ (i, i = 1, 4) /)
    call MPI_Send(buf, 4, MPI_INTEGER, 1, 7, MPI_COMM_WORLD)
  else if (rank == 1) then
    call MPI_Recv(buf, 4, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st)
    call MPI_Get_count(st, MPI_INTEGER, n)
    if (n /= 4 .or. st%MPI_SOURCE /= 0 .or. st%MPI_TAG /= 7 .or. buf(4) /= 4) call MPI_Abort(MPI_COMM_WORLD, 5)
  end if
  call MPI_Barrier(MPI_COMM_WORLD)
  print '(A,I0)', 'PASS basic_f08 rank ', rank
  call MPI_Finalize()
end program basic_f08
