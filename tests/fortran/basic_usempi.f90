! Fortran through the mpi module (use mpi): MPI_Init, Comm_rank/size, Probe and Recv with
! a status array (MPI_STATUS_SIZE, MPI_SOURCE/MPI_TAG, MPI_Get_count), MPI_STATUS_IGNORE,
! Bcast, Reduce and Allreduce on INTEGER and DOUBLE PRECISION (MPI_IN_PLACE at the root and
! everywhere), Gather and Scatter, Barrier, a derived type (MPI_Type_contiguous of a
! strided MPI_Type_create_resized pair), Isend/Irecv/Waitall with MPI_STATUSES_IGNORE
! and with a statuses array, Comm_split and Comm_dup, Wtime/Wtick, Get_processor_name,
! Finalize, MINLOC/MAXLOC on MPI_2DOUBLE_PRECISION, MPI_2REAL and MPI_2INTEGER (ties keep
! the lowest index). Every value is checked; a failure calls MPI_Abort; a passing rank prints
! "PASS basic_usempi rank <r>" last. At least 2 ranks (2 and 3 tested).
program basic_usempi
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, i, r, cnt, pair, spread, sub, dup, srank, ssize, res, nlen
  integer :: status(MPI_STATUS_SIZE), statuses(MPI_STATUS_SIZE, 4), reqs(4)
  integer :: ibuf(8), iall(128), isum, mine(2), back(2), packed(6), src(12)
  double precision :: x(2), xsum(2), t1, t2, dloc(2), dout(2)
  real :: rloc(2), rout(2)
  integer :: iloc(2), iout(2)
  character(len=MPI_MAX_PROCESSOR_NAME) :: host

  call MPI_Init(ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Init')
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  call check(nprocs >= 2 .and. nprocs <= 64, 'needs 2 to 64 ranks')
  t1 = MPI_Wtime()
  call MPI_Get_processor_name(host, nlen, ierr)
  call check(nlen > 0 .and. nlen <= MPI_MAX_PROCESSOR_NAME, 'processor name')

  ! Every rank but 0 sends rank+1 integers to rank 0, which probes for the size.
  if (rank /= 0) then
    ibuf = (/ (rank * 1000 + i, i = 1, 8) /)
    call MPI_Send(ibuf, rank + 1, MPI_INTEGER, 0, 7 * rank, MPI_COMM_WORLD, ierr)
  else
    do r = 1, nprocs - 1
      call MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
      call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
      call check(status(MPI_TAG) == 7 * status(MPI_SOURCE) .and. cnt == status(MPI_SOURCE) + 1, 'probe')
      ibuf = -1
      call MPI_Recv(ibuf, 8, MPI_INTEGER, status(MPI_SOURCE), status(MPI_TAG), MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
      call check(ibuf(cnt) == status(MPI_SOURCE) * 1000 + cnt .and. ibuf(cnt + 1) == -1, 'recv')
    end do
  end if

  ! Bcast, Reduce (in place at the root), Allreduce (in place everywhere).
  x = 0d0
  if (rank == 0) x = (/ 0.25d0, -8d0 /)
  call MPI_Bcast(x, 2, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  call check(x(1) == 0.25d0 .and. x(2) == -8d0, 'bcast')
  x = (/ dble(rank), 1d0 /)
  if (rank == nprocs - 1) then
    call MPI_Reduce(MPI_IN_PLACE, x, 2, MPI_DOUBLE_PRECISION, MPI_SUM, nprocs - 1, MPI_COMM_WORLD, ierr)
    call check(x(1) == dble(nprocs * (nprocs - 1) / 2) .and. x(2) == dble(nprocs), 'reduce in place')
  else
    call MPI_Reduce(x, xsum, 2, MPI_DOUBLE_PRECISION, MPI_SUM, nprocs - 1, MPI_COMM_WORLD, ierr)
  end if
  isum = 2 ** rank
  call MPI_Allreduce(MPI_IN_PLACE, isum, 1, MPI_INTEGER, MPI_BOR, MPI_COMM_WORLD, ierr)
  call check(isum == 2 ** nprocs - 1, 'allreduce bor in place')
  call MPI_Allreduce(rank + 1, isum, 1, MPI_INTEGER, MPI_PROD, MPI_COMM_WORLD, ierr)
  cnt = 1
  do r = 2, nprocs
    cnt = cnt * r
  end do
  call check(isum == cnt, 'allreduce prod')

  dloc = (/ dble(min(rank, 1)), dble(rank) /)
  call MPI_Allreduce(dloc, dout, 1, MPI_2DOUBLE_PRECISION, MPI_MAXLOC, MPI_COMM_WORLD, ierr)
  call check(dout(1) == 1d0 .and. dout(2) == 1d0, 'maxloc 2double_precision')
  rloc = (/ real(nprocs - rank), real(rank) /)
  call MPI_Allreduce(rloc, rout, 1, MPI_2REAL, MPI_MINLOC, MPI_COMM_WORLD, ierr)
  call check(rout(1) == 1.0 .and. rout(2) == real(nprocs - 1), 'minloc 2real')
  iloc = (/ min(rank, 1) + 5, rank /)
  call MPI_Allreduce(iloc, iout, 1, MPI_2INTEGER, MPI_MINLOC, MPI_COMM_WORLD, ierr)
  call check(iout(1) == 5 .and. iout(2) == 0, 'minloc 2integer')

  ! Gather two integers per rank at rank 1, scatter them back reversed.
  mine = (/ rank, -rank /)
  iall = 0
  call MPI_Gather(mine, 2, MPI_INTEGER, iall, 2, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
  if (rank == 1) then
    do r = 0, nprocs - 1
      call check(iall(2 * r + 1) == r .and. iall(2 * r + 2) == -r, 'gather')
    end do
    iall(1:2 * nprocs) = iall(2 * nprocs:1:-1)
  end if
  call MPI_Scatter(iall, 2, MPI_INTEGER, back, 2, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
  r = nprocs - 1 - rank
  call check(back(1) == -r .and. back(2) == r, 'scatter')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)

  ! A derived type: pairs taken every 4 integers (resized to a 16-byte extent), 3 of them.
  call MPI_Type_contiguous(2, MPI_INTEGER, pair, ierr)
  call MPI_Type_create_resized(pair, 0_MPI_ADDRESS_KIND, 16_MPI_ADDRESS_KIND, spread, ierr)
  call MPI_Type_commit(spread, ierr)
  src = (/ (rank * 100 + i, i = 1, 12) /)
  packed = -1
  call MPI_Sendrecv(src, 3, spread, mod(rank + 1, nprocs), 5, packed, 6, MPI_INTEGER, &
                    mod(rank + nprocs - 1, nprocs), 5, MPI_COMM_WORLD, status, ierr)
  r = mod(rank + nprocs - 1, nprocs)
  call check(packed(1) == r * 100 + 1 .and. packed(3) == r * 100 + 5 .and. packed(6) == r * 100 + 10, &
             'derived type')
  call MPI_Type_free(spread, ierr)
  call MPI_Type_free(pair, ierr)

  ! Isend/Irecv both ways around the ring.
  ibuf = -1
  iall(1:2) = -1
  mine = (/ rank, rank * 2 /)
  call MPI_Irecv(ibuf, 2, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 11, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Irecv(iall, 2, MPI_INTEGER, mod(rank + 1, nprocs), 12, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Isend(mine, 2, MPI_INTEGER, mod(rank + 1, nprocs), 11, MPI_COMM_WORLD, reqs(3), ierr)
  call MPI_Isend(mine, 2, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 12, MPI_COMM_WORLD, reqs(4), ierr)
  call MPI_Waitall(4, reqs, statuses, ierr)
  call check(statuses(MPI_SOURCE, 1) == r .and. statuses(MPI_TAG, 2) == 12, 'waitall statuses')
  call check(ibuf(2) == 2 * r .and. iall(1) == mod(rank + 1, nprocs), 'isend/irecv data')
  call MPI_Irecv(ibuf, 1, MPI_INTEGER, MPI_ANY_SOURCE, 13, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(rank, 1, MPI_INTEGER, mod(rank + 1, nprocs), 13, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
  call check(ibuf(1) == r, 'waitall with MPI_STATUSES_IGNORE')

  ! Split by rank / 2 (pairs), dup, and compare.
  call MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, sub, ierr)
  call MPI_Comm_rank(sub, srank, ierr)
  call MPI_Comm_size(sub, ssize, ierr)
  call check(srank == mod(rank, 2) .and. ssize == min(2, nprocs - 2 * (rank / 2)), 'split')
  call MPI_Comm_dup(sub, dup, ierr)
  call MPI_Comm_compare(sub, dup, res, ierr)
  call check(res == MPI_CONGRUENT, 'dup compares congruent')
  call MPI_Allreduce(rank, isum, 1, MPI_INTEGER, MPI_MAX, dup, ierr)
  call check(isum == min(2 * (rank / 2) + 1, nprocs - 1), 'allreduce on the dup')
  call MPI_Comm_free(dup, ierr)
  call MPI_Comm_free(sub, ierr)
  call check(sub == MPI_COMM_NULL, 'freed communicator')

  t2 = MPI_Wtime()
  call check(t2 >= t1 .and. MPI_Wtick() > 0d0, 'wtime')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  print '(a,i0)', 'PASS basic_usempi rank ', rank
  call MPI_Finalize(ierr)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,a,a)', 'FAIL rank ', rank, ': ', what
      call MPI_Abort(MPI_COMM_WORLD, 3, e)
    end if
  end subroutine check
end program basic_usempi
